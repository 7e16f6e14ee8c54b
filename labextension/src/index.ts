/**
 * trn-notebook status-bar item.
 *
 * Shows the simulated `neuron` device state of the active notebook's kernel:
 * device label, memory allocated / capacity, compile cache hits / misses and
 * the number of ops that fell back to CPU. The kernel side
 * (`trn_notebook/magics/status_comm.py`) opens a comm on the target
 * `trn-notebook-status` when `%load_ext trn_notebook` runs and sends a new
 * payload after each cell whose state changed. Clicking the item inserts a
 * `%trn dashboard` cell below the active cell and runs it.
 *
 * The front end only draws: every figure comes from the kernel's payload.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Dialog, ISessionContext, showDialog } from '@jupyterlab/apputils';
import {
  INotebookTracker,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

/** Comm target shared with the kernel side. */
export const COMM_TARGET = 'trn-notebook-status';

/** Command run when the status item is clicked. */
export const DASHBOARD_COMMAND = 'trn-notebook:open-dashboard';

/** Source of the cell inserted by the dashboard command. */
export const DASHBOARD_SOURCE = '%trn dashboard';

/** The kernel's status message (mirrors `StatusPayload` in status_comm.py). */
export interface IStatusPayload {
  type: 'status';
  loaded: true;
  device: string;
  label: string;
  chip: string;
  memory_allocated: number;
  memory_capacity: number;
  cache_hits: number;
  cache_misses: number;
  fallback_ops: number;
  text: string; // the status-bar line, formatted by the kernel
  title: string; // its tooltip, formatted by the kernel
}

/** Sent instead of a status when the kernel failed to compute one. */
export interface IStatusError {
  type: 'error';
  loaded: true;
  message: string;
}

type KernelState = IStatusPayload | IStatusError;

/** Narrow an untrusted comm message to a kernel state, or null. */
function parseState(data: unknown): KernelState | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const msg = data as { [key: string]: unknown };
  if (
    msg.type === 'status' &&
    typeof msg.text === 'string' &&
    typeof msg.title === 'string'
  ) {
    return msg as unknown as IStatusPayload;
  }
  if (msg.type === 'error') {
    return {
      type: 'error',
      loaded: true,
      message: String(msg.message ?? 'unknown error')
    };
  }
  return null;
}

/** One line for the status bar and a longer tooltip. */
export function describe(state: KernelState | null): {
  text: string;
  title: string;
} {
  if (state === null) {
    return {
      text: 'trn: not loaded',
      title:
        'trn-notebook is not loaded in this kernel: run %load_ext trn_notebook in a cell (click for how)'
    };
  }
  if (state.type === 'error') {
    return {
      text: 'trn: status error',
      title: `trn-notebook could not read the device status: ${state.message}`
    };
  }
  // The kernel formats every figure (trn_notebook.presentation); nothing is formatted here.
  return { text: state.text, title: state.title };
}

/**
 * The latest state sent by each kernel, kept for every open notebook so that
 * switching notebooks shows the right figures at once.
 */
class KernelStates {
  /** Emits the kernel connection whose state changed. */
  get changed(): ISignal<this, Kernel.IKernelConnection> {
    return this._changed;
  }

  get(kernel: Kernel.IKernelConnection | null | undefined): KernelState | null {
    return kernel ? (this._states.get(kernel) ?? null) : null;
  }

  /** Follow a notebook's kernel through restarts and kernel changes. */
  track(sessionContext: ISessionContext): void {
    sessionContext.kernelChanged.connect((_, change) => {
      if (change.newValue) {
        this._attach(change.newValue);
      }
    });
    sessionContext.statusChanged.connect((_, status) => {
      const kernel = sessionContext.session?.kernel;
      if (!kernel) {
        return;
      }
      if (
        status === 'restarting' ||
        status === 'autorestarting' ||
        status === 'starting' ||
        status === 'dead'
      ) {
        // The new kernel process starts without trn_notebook loaded.
        this._set(kernel, null);
        // Registration is per connection and idempotent; renewing it on a
        // restart keeps working should JupyterLab clear the registry.
        this._register(kernel);
      }
    });
    const kernel = sessionContext.session?.kernel;
    if (kernel) {
      this._attach(kernel);
    }
  }

  /** Register the comm target and pick up a comm the kernel already opened. */
  private _attach(kernel: Kernel.IKernelConnection): void {
    this._register(kernel);
    if (!kernel.handleComms) {
      return;
    }
    // After a page reload the kernel's comm is still open: find it by target
    // and ask for a fresh payload.
    kernel
      .requestCommInfo({ target_name: COMM_TARGET })
      .then(reply => {
        if (reply.content.status !== 'ok' || kernel.isDisposed) {
          return;
        }
        for (const commId of Object.keys(reply.content.comms)) {
          if (kernel.hasComm(commId)) {
            continue;
          }
          const comm = kernel.createComm(COMM_TARGET, commId);
          this._listen(kernel, comm);
          comm.send({ type: 'request' });
        }
      })
      .catch(reason => {
        console.debug('trn-notebook: comm info request failed', reason);
      });
  }

  private _register(kernel: Kernel.IKernelConnection): void {
    if (kernel.isDisposed) {
      return;
    }
    kernel.registerCommTarget(COMM_TARGET, (comm, msg) => {
      this._listen(kernel, comm);
      this._receive(kernel, msg.content.data);
    });
  }

  private _listen(kernel: Kernel.IKernelConnection, comm: Kernel.IComm): void {
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      this._receive(kernel, msg.content.data);
    };
    comm.onClose = () => {
      this._set(kernel, null);
    };
  }

  private _receive(kernel: Kernel.IKernelConnection, data: unknown): void {
    const state = parseState(data);
    if (state !== null) {
      this._set(kernel, state);
    }
  }

  private _set(kernel: Kernel.IKernelConnection, state: KernelState | null): void {
    if (state === null) {
      if (!this._states.has(kernel)) {
        return;
      }
      this._states.delete(kernel);
    } else {
      this._states.set(kernel, state);
    }
    this._changed.emit(kernel);
  }

  private _states = new WeakMap<Kernel.IKernelConnection, KernelState>();
  private _changed = new Signal<this, Kernel.IKernelConnection>(this);
}

/** The status-bar widget: a single clickable line of text. */
class StatusItem extends Widget {
  constructor(onClick: () => void) {
    super({ node: document.createElement('span') });
    this.id = 'trn-notebook-status';
    this.addClass('jp-StatusBar-TextItem');
    this.addClass('trn-StatusItem');
    // Inline style keeps the bundle free of a CSS module (and its loader).
    this.node.style.cursor = 'pointer';
    this.node.style.whiteSpace = 'nowrap';
    // Never push JupyterLab's own items off a narrow window: shrink with an ellipsis instead.
    this.node.style.display = 'inline-block';
    this.node.style.maxWidth = '40vw';
    this.node.style.overflow = 'hidden';
    this.node.style.textOverflow = 'ellipsis';
    this.node.style.verticalAlign = 'bottom';
    this.node.addEventListener('click', onClick);
    this.render(null);
  }

  render(state: KernelState | null): void {
    const { text, title } = describe(state);
    this.node.textContent = text;
    this.node.title = title;
    this.node.dataset.trnLoaded = state === null ? 'false' : 'true';
    this.node.style.opacity = state === null ? '0.7' : '';
  }
}

/** Insert a `%trn dashboard` code cell below the active one and run it. */
async function openDashboard(panel: NotebookPanel): Promise<void> {
  const notebook = panel.content;
  const model = notebook.model;
  if (!model) {
    return;
  }
  const index = notebook.activeCellIndex + 1;
  model.sharedModel.insertCell(index, {
    cell_type: 'code',
    source: DASHBOARD_SOURCE
  });
  notebook.activeCellIndex = index;
  notebook.deselectAll();
  await NotebookActions.run(notebook, panel.sessionContext);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'trn-notebook:status',
  description: 'Live status of the simulated neuron device in the status bar.',
  autoStart: true,
  requires: [INotebookTracker, IStatusBar],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    statusBar: IStatusBar
  ): void => {
    const states = new KernelStates();
    const currentKernel = () =>
      tracker.currentWidget?.sessionContext.session?.kernel ?? null;

    app.commands.addCommand(DASHBOARD_COMMAND, {
      label: 'trn-notebook: Run %trn dashboard in a New Cell',
      isEnabled: () => states.get(currentKernel()) !== null,
      execute: async () => {
        const panel = tracker.currentWidget;
        if (panel) {
          await openDashboard(panel);
        }
      }
    });

    const item = new StatusItem(() => {
      if (app.commands.isEnabled(DASHBOARD_COMMAND)) {
        void app.commands.execute(DASHBOARD_COMMAND);
      } else {
        // Not loaded in this kernel: say how, instead of doing nothing.
        void showDialog({
          title: 'trn-notebook is not loaded in this kernel',
          body:
            'Run %load_ext trn_notebook in a notebook cell; the status bar then shows the ' +
            'neuron device, its memory, the compile cache and CPU fallbacks, and a click opens ' +
            '%trn dashboard.',
          buttons: [Dialog.okButton()]
        });
      }
    });
    const refresh = () => item.render(states.get(currentKernel()));

    const follow = (panel: NotebookPanel) => {
      states.track(panel.sessionContext);
      panel.sessionContext.kernelChanged.connect(() => {
        if (panel === tracker.currentWidget) {
          refresh();
        }
      });
    };
    tracker.forEach(follow);
    tracker.widgetAdded.connect((_, panel) => follow(panel));
    tracker.currentChanged.connect(refresh);
    states.changed.connect((_, kernel) => {
      if (kernel === currentKernel()) {
        refresh();
      }
    });

    statusBar.registerStatusItem(plugin.id, {
      item,
      align: 'left',
      rank: 100,
      isActive: () => tracker.currentWidget !== null,
      activeStateChanged: tracker.currentChanged as unknown as ISignal<any, void>
    });
  }
};

export default plugin;
