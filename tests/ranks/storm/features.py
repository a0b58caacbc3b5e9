"""The storm's switches: each kind of thing it may generate can be turned off on its own.

Every feature is on by default; turning one off (``--disable NAME``) narrows a failing storm down to
what it needs. A feature that is off by default would guard a known engine problem, and say which.
"""
from typing import Iterable

# name -> (on by default, what it generates)
FEATURES: dict[str, tuple[bool, str]] = {
    "groups": (True, "grouped_allreduce / grouped_allgather / grouped_reducescatter, mixed dtypes included"),
    "async": (True, "*_async calls whose handles are waited later, in a different random order on each rank"),
    "dropped": (True, "async handles that are never waited (the engine must keep their arrays alive)"),
    "in_place": (True, "allreduce_ / grouped_allreduce_ / broadcast_"),
    "scale": (True, "prescale/postscale factors on floating-point reductions"),
    "scale_min_max": (True, "prescale/postscale with Min, Max and Product (host tensors)"),
    "noncontig": (True, "non-contiguous views as read-only inputs"),
    "big": (True, "tensors of up to several MiB"),
    "sets": (True, "process sets added and removed during the run (single-member and non-contiguous ones too)"),
    "names": (True, "names reused across ops and across process sets (response cache hits, misses and "
                    "replacements), unnamed ops"),
    "objects": (True, "broadcast_object / allgather_object"),
    "mismatch": (True, "ops that ranks submit differently on purpose: every member must get TensorMismatchError"),
    "bad_input": (True, "calls every member rejects before enqueueing (a clear ValueError or TypeError)"),
    "restart": (True, "shutdown and init again with other engine settings, within one run"),
    "timeline": (True, "segments that write a timeline (events forwarded to rank 0)"),
    "autotune": (True, "segments with HOROVOD_AUTOTUNE=1"),
    "wrap": (True, "8-bit integer reductions that overflow (two's-complement wrap, as in numpy)"),
    "remove_pending": (True, "removing a process set while async ops on it are not yet waited (they are waited "
                             "after it is gone)"),
    "same_name_sets": (True, "the same name in flight in several disjoint process sets at once"),
    "int_scale": (True, "prescale/postscale on integer host tensors (scaled in float64 and cast back, as in Horovod)"),
    "nan_scale": (True, "a NaN prescale factor (alike on every member: no TensorMismatchError)"),
    "frac_splits": (True, "fractional alltoall splits, which every member must refuse"),
    "join": (True, "hvd.join by some members of a set while the others run ops the joined ones stand in for "
                   "(allreduces, barriers) or that must raise TensorMismatchError (the rest)"),
}


def resolve(enable: Iterable[str] = (), disable: Iterable[str] = ()) -> frozenset:
    """The features on: the defaults, plus ``enable``, minus ``disable`` ('all' names every feature)."""
    on = {name for name, (default, _) in FEATURES.items() if default}
    for names, add in ((enable, True), (disable, False)):
        for name in names:
            chosen = list(FEATURES) if name == "all" else [name]
            for n in chosen:
                if n not in FEATURES:
                    raise ValueError(f"unknown storm feature {n!r}; known: {', '.join(FEATURES)}")
                (on.add if add else on.discard)(n)
    return frozenset(on)


def describe(on: frozenset) -> str:
    """The flags that select ``on``, relative to the defaults (empty for the defaults)."""
    enable = sorted(n for n in on if not FEATURES[n][0])
    disable = sorted(n for n, (default, _) in FEATURES.items() if default and n not in on)
    return " ".join(([f"--enable {','.join(enable)}"] if enable else []) +
                    ([f"--disable {','.join(disable)}"] if disable else []))
