"""One layout, dry: build the model on ``neuron`` shape-only, lay it out (TP, AC, FSDP2), run a training step.

The model is built on ``meta``, laid out, then given each rank's shards on ``neuron`` with
``to_empty`` (as torchtitan's estimator does: no rank ever holds the whole model; the weights' values
are not initialised, a dry run needs none). The layout is torch's own: ``parallelize_module`` (:mod:`.tensor_parallel`: sequence parallel with a
vocabulary-parallel embedding and head for Llama-shaped models, else the Megatron split of the q/k/v/o and
gate/up/down projections), activation
checkpointing with ``apply_activation_checkpointing`` (non-reentrant) on each decoder layer, then
``fully_shard`` of each decoder layer and of the root on the mesh's ``dp`` dimension. When TP exceeds
the model's K/V heads, the K/V heads are replicated up to TP (NxD Inference's ``GQA.CONVERT_TO_MHA``),
and the run says so.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..device.chips import ChipSpec
from ..dry.run import DryRun, dryrun
from . import tensor_parallel
from .layouts import Layout, Workload
from .step import StepFigures, training_step

NO_OOM = 1 << 50  # the dry allocator's capacity while planning: the peak is the answer, compared afterwards


@dataclass
class ModelSource:
    """How to build the model: a ``transformers`` config (any ``*ForCausalLM``) or a factory ``() -> nn.Module``."""

    config: Any = None
    factory: Callable[[], nn.Module] | None = None
    name: str = "model"

    @classmethod
    def of(cls, model: Any) -> ModelSource:
        """Read a config, a :class:`~trn_notebook.fidelity.configs.ModelSpec` or a factory; ``TypeError`` otherwise."""
        if hasattr(model, "config") and hasattr(model, "family") and callable(model.config):  # ModelSpec
            return cls(config=model.config(), name=model.name)
        if hasattr(model, "to_dict") and hasattr(model, "model_type"):  # transformers PretrainedConfig
            return cls(config=model, name=getattr(model, "name_or_path", "") or model.model_type)
        if isinstance(model, nn.Module):
            raise TypeError(
                "plan() builds the model itself for each layout: pass a factory (lambda: MyModel(...)) or a "
                "transformers config, not a built nn.Module"
            )
        if callable(model):
            return cls(factory=model, name=getattr(model, "__name__", "model"))
        raise TypeError(f"plan() takes a transformers config or a model factory, got {type(model).__name__}")

    def with_layers(self, n: int) -> ModelSource:
        """The same config with ``n`` decoder layers (for :func:`~trn_notebook.planner.plan`'s ``depths``)."""
        cfg = copy.deepcopy(self.config)
        cfg.num_hidden_layers = n
        return ModelSource(config=cfg, name=self.name)

    def layers(self) -> int | None:
        """Decoder layers of a config (``None`` for a factory)."""
        return None if self.config is None else int(self.config.num_hidden_layers)

    def hidden(self) -> int | None:
        """Hidden width of a config (``None`` for a factory)."""
        return None if self.config is None else int(self.config.hidden_size)

    def kv_heads(self) -> int | None:
        """K/V heads of a config (``None`` for a factory)."""
        if self.config is None:
            return None
        return int(getattr(self.config, "num_key_value_heads", None) or self.config.num_attention_heads)

    def build(self, tp: int) -> tuple[nn.Module, str | None]:
        """The model (inside the dry run, on ``neuron``); with a note when K/V heads were replicated for ``tp``."""
        if self.factory is not None:
            return self.factory(), None

        cfg = self.config
        note = None
        kv = self.kv_heads()
        if kv is not None and tp > kv:
            if tp % kv:
                raise ValueError(
                    f"TP {tp} is not a multiple of the model's {kv} K/V heads; choose a TP dividing or a multiple of {kv}"
                )
            cfg = copy.deepcopy(cfg)
            cfg.num_key_value_heads = tp
            note = (
                f"TP {tp} > {kv} K/V heads: K/V heads replicated {kv} → {tp} (one per rank, as NxD Inference's "
                "GQA.CONVERT_TO_MHA does); K/V projection memory and FLOPs grow accordingly"
            )
        return _auto_class(cfg).from_config(cfg), note


def _auto_class(config: Any) -> Any:
    """``AutoModelForImageClassification`` for an image model (ViT fine-tuning), ``AutoModelForMaskedLM`` for an
    encoder (a model type with a masked-LM head, not marked a decoder: BERT's pre-training), else
    ``AutoModelForCausalLM``."""
    import transformers
    from transformers.models.auto import modeling_auto

    if is_vision(config):
        return transformers.AutoModelForImageClassification
    if config.model_type in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES and not getattr(
        config, "is_decoder", False
    ):
        return transformers.AutoModelForMaskedLM
    return transformers.AutoModelForCausalLM


def is_vision(config: Any) -> bool:
    """An image classifier's config (a model type with an image-classification head and an ``image_size``)."""
    from transformers.models.auto import modeling_auto

    names = modeling_auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES
    return config is not None and config.model_type in names and hasattr(config, "image_size")


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks: the longest ``nn.ModuleList`` in the model (a Llama's ``model.layers``)."""
    lists: list[list[nn.Module]] = [list(m) for m in model.modules() if isinstance(m, nn.ModuleList)]
    return max(lists, key=len) if lists else []


@contextmanager
def _chip(spec: ChipSpec) -> Iterator[None]:
    from ..device.memory import runtime

    saved = runtime.state.chip
    runtime.state.chip = spec  # the cost model's chip for this dry run (capacity is the dry allocator's own)
    try:
        yield
    finally:
        runtime.state.chip = saved


@contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


@dataclass
class LayoutRun:
    """The figures of one layout's dry step (all modeled)."""

    layout: Layout
    run: DryRun
    params: int
    step: StepFigures
    note: str | None

    @property
    def step_s(self) -> float:
        """Modeled seconds of one optimizer step (all microbatches, the bubble, the optimizer)."""
        return self.step.step_s


def _loss(model: nn.Module, ids: torch.Tensor, config: Any, sequence_parallel: bool) -> torch.Tensor:
    if config is None:
        return model(ids).float().mean()
    if is_vision(config):  # a microbatch of images (ids' rows): pixels at the config's size, one label each
        size, channels = int(config.image_size), int(getattr(config, "num_channels", 3))
        pixels = torch.zeros(ids.shape[0], channels, size, size, device=ids.device)
        labels = torch.zeros(ids.shape[0], dtype=torch.long, device=ids.device)
        return model(pixel_values=pixels, labels=labels).loss
    if not sequence_parallel:
        return model(input_ids=ids, labels=ids, use_cache=False).loss
    # the residual stream holds a shard of the sequence: positions are given for the whole of it
    positions = torch.arange(ids.shape[1], device=ids.device)
    return model(
        input_ids=ids, labels=ids, position_ids=positions[None], cache_position=positions, use_cache=False
    ).loss


def _graph_pricing(run: DryRun) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """A compiled training step's prices: in-graph kernels at the training graphs' fitted MFU."""
    from ..device.costmodel import get_cost_constants

    efficiency = get_cost_constants().training_compute_efficiency
    return lambda: run.priced_as_graph(compute_efficiency=efficiency)


def run_layout(
    source: ModelSource,
    layout: Layout,
    workload: Workload,
    chip: ChipSpec,
    dtype: torch.dtype,
    execution: str = "eager",
) -> LayoutRun:
    """Dry-run one training step of ``source`` laid out as ``layout`` (see the module docstring).

    Raises ``ValueError`` when the layout does not suit the model (no projections to split for TP, pipeline
    stages of a model given as a factory, a global batch the layout cannot divide).
    """
    from torch.distributed.fsdp import fully_shard

    workload.microbatches(layout)  # a global batch the layout cannot divide fails before any work
    note = None
    if layout.pp > 1:
        full = source.layers()
        if full is None:
            raise ValueError(f"layout {layout.name}: pipeline stages need a transformers config (its layers to split)")
        if full % layout.pp:
            raise ValueError(f"layout {layout.name}: {full} layers do not split into {layout.pp} equal stages")
        source = source.with_layers(full // layout.pp)
    mesh_shape = (layout.data_parallel, layout.pp, layout.tp) if layout.pp > 1 else (layout.data_parallel, layout.tp)
    run = dryrun(
        f"plan {source.name} {layout.name}",
        capacity=NO_OOM,
        world_size=layout.world_size,
        mesh_shape=mesh_shape,
        mesh_dim_names=("dp", "pp", "tp") if layout.pp > 1 else ("dp", "tp"),
    )
    with _chip(chip), run, _default_dtype(dtype):
        with torch.device("meta"):  # laid out before any device memory exists, as torchtitan does
            model, note = source.build(layout.tp)
        layers = decoder_layers(model)
        in_layers = sum(p.numel() for layer in layers for p in layer.parameters())
        params = sum(p.numel() for p in model.parameters()) + (layout.pp - 1) * in_layers  # every stage's layers
        notes = [note] if note else []
        sp = layout.tp > 1 and tensor_parallel.sequence_parallel_applies(model, source.config)
        if sp:
            tensor_parallel.sequence_parallel(model, run.mesh["tp"])
            notes.append(
                "TP: sequence parallel, vocabulary-parallel embedding and head, loss on the shards, causal flash "
                "attention (torchtitan's Llama plan; NxD Training's sequence_parallel_enabled)"
            )
        elif layout.tp > 1 and (not layers or tensor_parallel.megatron(layers, run.mesh["tp"]) == 0):
            raise ValueError(
                f"layout {layout.name}: found no q/k/v/o or gate/up/down nn.Linear projections in repeated "
                "layers to split for tensor parallelism; use TP 1 for this model"
            )
        if layout.ac:
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

            kinds = tuple({type(x) for x in layers})
            apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, kinds))
            layers = decoder_layers(model)
        if layout.fsdp > 1:
            dp = run.mesh["dp"]
            for layer in layers:
                fully_shard(layer, mesh=dp, reshard_after_forward=layout.reshard)
            fully_shard(model, mesh=dp, reshard_after_forward=layout.reshard)
        with run.phase("init"):
            model.to_empty(device="neuron")  # each rank's shards only; values are not needed (a real run loads them)
        if layout.pp > 1:
            notes.append(
                f"PP: a stage of {source.layers()} layers with the embedding and the head (the slowest stage, an "
                "upper bound); 1F1B schedule"
            )
        note = "; ".join(notes) or None
        if note:
            run.note(note)
        hidden = source.hidden() or 0
        step = training_step(
            run,
            model,
            layout,
            workload,
            dtype,
            lambda m, ids: _loss(m, ids, source.config, sp),
            hidden,
            tensor_parallel.loss_on_shards if sp else contextlib.nullcontext,
            _graph_pricing(run) if execution == "graph" else contextlib.nullcontext,
        )
    return LayoutRun(layout, run, params, step, note)
