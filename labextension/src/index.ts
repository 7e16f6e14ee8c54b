/**
 * trn-notebook status-bar item.
 *
 * Shows the simulated `neuron` device state of the active notebook's kernel:
 * device label, memory allocated / capacity, compile cache hits / misses and
 * the number of ops that fell back to CPU, and the compile time measured
 * beside the modeled Neuron compile. The kernel side
 * (`trn_notebook/magics/status_comm.py`) registers the comm target
 * `trn-notebook-status` when `%load_ext trn_notebook` runs; this front end
 * opens a comm on it (the kernel never opens one, so headless runs see no
 * comm traffic) and the kernel answers with its payload, then sends a new
 * one after each cell whose state changed. Clicking the item inserts a
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
import { CommsOverSubshells, Kernel, KernelMessage } from '@jupyterlab/services';
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
  compile_s: number; // measured: our compiler's wall seconds
  modeled_compile_s: number | null; // modeled Neuron compile seconds of the misses
  compile_text: string; // both, formatted by the kernel ('' before any compile)
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
  // The kernel formats every figure (trn_notebook.display.format); nothing is formatted here.
  return { text: state.text, title: state.title };
}

/** Only kernels of this language can load trn_notebook: others are never probed. */
const KERNEL_LANGUAGE = 'python';

/** Code that loads the extension names it: after such an execution the status target is probed at once. */
const LOADS_EXTENSION = /trn_notebook|load_ext/;

/** Probes without a reason back off to one every this many executions. */
const PROBE_BACKOFF_MAX = 64;

/**
 * The status comm of one kernel connection, opened by this front end (the
 * kernel only registers the target).
 *
 * It probes for the target when the connection is made, when a restarted
 * kernel is ready, and after executions while no comm is open (at once after
 * code naming the extension, else with a back-off, see `_onIOPub`): first a
 * `comm_info_request` for an open comm on the target (after a page reload the
 * kernel still has the one this page had opened: it is reused and asked for
 * the payload), otherwise `createComm` + `open`. A kernel that has not loaded
 * trn_notebook closes the new comm at once: that is "not loaded", and the next
 * execution probes again. No probe overlaps another.
 */
class KernelLink {
  constructor(
    private readonly _kernel: Kernel.IKernelConnection,
    private readonly _onState: (state: KernelState | null) => void
  ) {
    _kernel.iopubMessage.connect(this._onIOPub, this);
    _kernel.statusChanged.connect(this._onStatus, this);
    this.probe();
  }

  /**
   * Stop following the kernel. The comm is left open in the kernel: another
   * page on the same kernel may have found it with `comm_info_request` and
   * share it, and a page that comes back reuses it the same way.
   */
  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._generation += 1;
    Signal.disconnectReceiver(this);
    this._comm = null;
  }

  /** Probe now, or as soon as the probe under way ends without a comm. */
  probe(): void {
    if (this._disposed || this._comm !== null) {
      return;
    }
    if (this._probing) {
      this._again = true;
      return;
    }
    this._probing = true;
    this._again = false;
    const generation = this._generation;
    this._probeOnce(generation)
      .catch(reason => {
        // A disposed or dead connection: nothing to report, the next kernel event probes again.
        console.debug('trn-notebook: status probe ended', reason);
      })
      .finally(() => {
        if (generation !== this._generation) {
          return;
        }
        this._probing = false;
        if (this._again) {
          this.probe();
        }
      });
  }

  private async _probeOnce(generation: number): Promise<void> {
    const kernel = this._kernel;
    if (!kernel.handleComms || kernel.isDisposed) {
      return;
    }
    const info = await kernel.info;
    if (info.language_info.name !== KERNEL_LANGUAGE || this._stale(generation)) {
      return;
    }
    const reply = await kernel.requestCommInfo({ target_name: COMM_TARGET });
    if (this._stale(generation) || this._comm !== null) {
      return;
    }
    const comms = reply.content.status === 'ok' ? reply.content.comms : {};
    const found = Object.keys(comms).find(id => !kernel.hasComm(id));
    await new Promise<void>(settle => {
      const comm = kernel.createComm(COMM_TARGET, found);
      // No subshell for the status comm: JupyterLab would start one per comm target with a request whose
      // future is cancelled, uncaught, when the kernel goes away first (a page error on a notebook closed
      // right after it opened). Set before the handler's own start, which runs a microtask later.
      comm.commsOverSubshells = CommsOverSubshells.Disabled;
      this._comm = comm;
      comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
        const state = parseState(msg.content.data);
        if (state !== null && this._comm === comm) {
          this._onState(state);
        }
        settle();
      };
      comm.onClose = () => {
        // Closed by the kernel: before any payload the target is not
        // registered (trn_notebook not loaded yet), after one it was unloaded.
        if (this._comm === comm) {
          this._comm = null;
          this._onState(null);
        }
        settle();
      };
      if (found !== undefined) {
        comm.send({ type: 'request' });
      } else {
        comm.open({ type: 'request' });
      }
    });
  }

  private _stale(generation: number): boolean {
    return this._disposed || this._kernel.isDisposed || generation !== this._generation;
  }

  private _onIOPub(_: Kernel.IKernelConnection, msg: KernelMessage.IIOPubMessage): void {
    if (this._comm !== null) {
      return;
    }
    if (KernelMessage.isExecuteInputMsg(msg)) {
      // Loading the extension names it (`%load_ext trn_notebook`, `load_ipython_extension`).
      this._named ||= LOADS_EXTENSION.test(msg.content.code);
      return;
    }
    const parent = msg.parent_header as Partial<KernelMessage.IHeader> | undefined;
    if (
      !KernelMessage.isStatusMsg(msg) ||
      msg.content.execution_state !== 'idle' ||
      parent?.msg_type !== 'execute_request'
    ) {
      return;
    }
    // An execution (from any client) finished. Probe at once when its code
    // named the extension; otherwise after the 1st, 2nd, 4th … execution
    // (every PROBE_BACKOFF_MAX-th at most), which finds a load made
    // indirectly (`%run`, a helper module) and costs a notebook that never
    // loads trn_notebook a handful of probes, not one per cell.
    this._executions += 1;
    if (this._named || this._executions >= this._nextProbe) {
      if (!this._named) {
        this._nextProbe =
          this._executions + Math.min(this._executions, PROBE_BACKOFF_MAX);
      }
      this._named = false;
      this.probe();
    }
  }

  private _onStatus(_: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (
      status === 'restarting' ||
      status === 'autorestarting' ||
      status === 'starting' ||
      status === 'dead'
    ) {
      // The new kernel process starts without trn_notebook loaded, and the
      // connection dropped its comms without closing them: start over. A
      // comm still held (a fresh kernel's "starting" during the first probe)
      // is only forgotten here: if the kernel has it, a probe finds it again.
      this._generation += 1;
      const held = this._comm;
      this._comm = null;
      if (held !== null && !held.isDisposed) {
        held.onMsg = () => undefined;
        held.onClose = () => undefined;
        held.dispose();
      }
      this._probing = false;
      this._again = false;
      this._restarted = true;
      this._executions = 0;
      this._nextProbe = 1;
      this._named = false;
      this._onState(null);
    } else if (status === 'idle' && this._restarted) {
      // Ready again: trn_notebook may be loaded at start-up (IPython config).
      this._restarted = false;
      this.probe();
    }
  }

  private _comm: Kernel.IComm | null = null;
  private _probing = false;
  private _again = false;
  private _restarted = false;
  private _executions = 0; // executions seen while no comm was open
  private _nextProbe = 1; // the execution count of the next probe without a reason
  private _named = false; // an execution since the last probe named the extension
  private _generation = 0;
  private _disposed = false;
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
      if (change.oldValue) {
        this._links.get(change.oldValue)?.dispose();
        this._links.delete(change.oldValue);
      }
      if (change.newValue) {
        this._link(change.newValue);
      }
    });
    const kernel = sessionContext.session?.kernel;
    if (kernel) {
      this._link(kernel);
    }
  }

  private _link(kernel: Kernel.IKernelConnection): void {
    if (this._links.has(kernel) || kernel.isDisposed) {
      return;
    }
    const link = new KernelLink(kernel, state => this._set(kernel, state));
    this._links.set(kernel, link);
    kernel.disposed.connect(() => {
      link.dispose();
      this._links.delete(kernel);
    });
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

  private _links = new Map<Kernel.IKernelConnection, KernelLink>();
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
    this.node.style.maxWidth = '50vw';
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
