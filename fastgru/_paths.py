"""The road: which driver runs each layer of a call, on how many threads, and running it.

``road`` decides once per call shape (a plan, ``fastgru._plan``, keeps its decision); ``run`` runs a
plan's call, taking at run time only what the moment gives: the threads the process-wide budget
grants (``_threading.lease``) and the partner thread (the plan's ``_partner.Shared``). This module is
the only reader of the thresholds that choose a path (``_tuning``): a plan stores the road, never
restates it.

Paths of one layer: 'serial', every row on the calling thread; 'parallel', blocks of rows (and the
directions) shared among Numba's threads; for a single row (batch 1, one direction), 'pair', split
with fastgru's partner thread, or 'split', split in a Numba parallel region when the partner is
off. A function API's call of one row and one step runs the direct drivers ('serial' or 'pair' of
the direct road). A stack of forward layers at one row may run as a 'wave' (the layers cut
between the calling thread and the partner), raced against its layers' own paths (``Race``).
Paths that share work get at least the calling thread: a call never waits for threads.
"""

import functools
import time
from collections import namedtuple

from . import _partner, _scratch, _tuning
from ._kernels.direct import direct_ints
from ._threading import lease, requested

PATHS = ("serial", "parallel", "split", "pair")

#: The decision for one call shape: each layer's path; 'threads' when one of them runs a parallel
#: region, 'partner' when one runs the pair driver, else 'serial'; whether the call is long enough to
#: wake a sleeping partner; the wavefront's cut (None: no wavefront) and whether it races the
#: layers' paths; the path forced (None: none); and whether the call is a direct one.
Road = namedtuple("Road", "paths needs wake cut race forced direct")


def choose(n_rows, n_steps, n_dirs, n_hidden, flops):
    """The path of one layer of N rows of S steps, D directions, H hidden units and ``flops`` (the
    products')."""
    if n_rows * n_dirs == 1:
        if _partner.PARTNER.enabled and n_hidden >= _tuning.PAIR_FROM_HIDDEN and flops >= _tuning.PAIR_FROM_FLOPS:
            return "pair"
        if (
            n_hidden >= _tuning.SPLIT_FROM_HIDDEN
            and n_steps >= _tuning.SPLIT_FROM_STEPS
            and flops >= _tuning.SERIAL_BELOW_FLOPS
        ):
            return "split"
        return "serial"
    return "serial" if flops < _tuning.SERIAL_BELOW_FLOPS else "parallel"


def road(layers, n, s, path=None, direct=False, wave_bytes=None):
    """The Road of a call of N rows and S steps through ``layers`` (each a ``_dispatch.Packed``, or an
    ``Unpacked`` template for a ``direct`` call); ``path`` forces one of PATHS on every layer, or
    'wave'; ``wave_bytes``: the larger part's packed weights of the stack's best cut, with the cut,
    (cut, bytes), when the call could run as a wavefront (``wave_cut``), else None."""
    flops = [packed.flops(n, s) for packed in layers]
    if direct:  # one row, one step: the pair path of one direction, or the calling thread
        first = layers[0]
        shared = first.n_dirs == 1 and choose(1, 1, 1, first.n_hidden, flops[0]) == "pair"
        paths = (path if path is not None else "pair" if shared else "serial",)
    elif path is not None and path != "wave":
        paths = (path,) * len(layers)
    else:
        paths = tuple(choose(n, s, p.n_dirs, p.n_hidden, f) for p, f in zip(layers, flops))
    needs = "threads" if {"parallel", "split"} & set(paths) else "partner" if "pair" in paths else "serial"
    cut = race = None
    if wave_bytes is not None and (path == "wave" or path is None and wave_bytes[1] <= _tuning.WAVE_MAX_BYTES):
        cut, race = wave_bytes[0], path is None and _tuning.WAVE_RETRY > 0
    return Road(paths, needs, max(flops) >= _tuning.PAIR_WAKE_FLOPS, cut, race, path, direct)


def hoists(rows, n_steps, n_hidden, itemsize):
    """Whether a task of ``rows`` rows computes X·Wᵀ + bias for all its steps first (it fits in cache)."""
    return rows * n_steps * 3 * n_hidden * itemsize <= _tuning.HOIST_BYTES


def wave_cut(sizes):
    """(cut, bytes) of a wavefront over layers of these packed weights' ``sizes`` (bytes): the first
    layer of the partner's part, chosen to balance the parts, and the larger part's bytes, which the
    road compares with one core's L2 (``_tuning.WAVE_MAX_BYTES``: beyond it the split of each row,
    whose halves fit, is faster)."""
    parts = {cut: max(sum(sizes[:cut]), sum(sizes[cut:])) for cut in range(1, len(sizes))}
    cut = min(parts, key=parts.get)
    return cut, parts[cut]


def effective(paths, granted, mailbox, forced):
    """Each layer's (path, threads, mailbox) when the call got ``granted`` threads and the partner's
    ``mailbox`` (None: no partner): threads for the parallel driver's blocks, the mailbox for the
    pair driver's; a path that cannot have what it needs runs serial, unless it is ``forced``
    (then a split row runs both halves in its parallel region, a pair row on this thread's own
    mailbox, which nobody serves)."""
    result = []
    for path in paths:
        if path in ("parallel", "split") and granted == 1 and not forced:
            path = "serial"
        elif path == "pair" and mailbox is None:
            path = "serial"
        result.append((path, granted if path == "parallel" else 0, mailbox if path == "pair" else None))
    return tuple(result)


def run(plan, arrays, entry):
    """Run ``plan``'s call on its ``arrays`` (X, h0, lengths, att, y, ho; a direct call's: X, h0,
    lengths, att, y, ho, W, R, B) through its ``entry`` (``_kernels/entry.py``). Returns each layer's
    path as it ran ('wave' for a wavefront's), or None when the entry found a shape or a length other
    than the plan's (nothing was written)."""
    way = plan.static
    if way is not None:  # a road of one way: nothing to take at run time
        return way.paths if _enter(entry, arrays, way) >= 0 else None
    road = plan.road
    if road.cut is None and road.needs != "partner":
        if road.needs == "serial":
            plan.static = way = plan.way(1, None)
            return way.paths if _enter(entry, arrays, way) >= 0 else None
        return _on_paths(plan, arrays, entry, None)
    shared = plan.shared  # the partner, taken once for the call
    try:
        shared.take(road.wake)
        if road.cut is None:
            return _on_paths(plan, arrays, entry, shared)
        if road.forced == "wave":
            took = _wavefront(plan, arrays, entry, shared)
            return ("wave" if took else "serial",) * len(road.paths)
        if shared.count < 2:  # no second thread: the layers' one-thread way, and no race
            return _on_paths(plan, arrays, entry, shared)
        if road.race:
            return _raced(plan, arrays, entry, shared)
        took = _wavefront(plan, arrays, entry, shared)
        if took is not None:
            return ("wave" if took else "serial",) * len(road.paths)
        return _on_paths(plan, arrays, entry, shared)
    finally:
        shared.release()


def _on_paths(plan, arrays, entry, shared):
    """The layers on their own paths, with what the moment gives: the partner thread (a pair road:
    ``shared``, what the call took), the threads of the budget (a road of parallel regions), or
    nothing (every layer serial)."""
    road = plan.road
    if road.needs == "partner":  # alone when the partner or a second thread did not come
        mailbox = shared.mailbox
        way = plan.ways.get(None if mailbox is None else id(mailbox)) or plan.way(1, mailbox)
        return way.paths if _enter(entry, arrays, way) >= 0 else None
    if shared is not None:  # layers that do not take the partner: what the call took goes back first
        shared.release()
    if road.needs == "threads":
        count = requested()
        if count == 1 and road.forced is None:  # no second thread to share with
            way = plan.ways.get(1) or plan.way(1, None)
            return way.paths if _enter(entry, arrays, way) >= 0 else None
        _partner.PARTNER.nap()  # a parallel region needs the cores the partner would spin on
        with lease(count, count) as granted:
            way = plan.ways.get(granted) or plan.way(granted, None)
            return way.paths if _enter(entry, arrays, way) >= 0 else None
    way = plan.ways.get(1) or plan.way(1, None)
    return way.paths if _enter(entry, arrays, way) >= 0 else None


def _enter(entry, arrays, way):
    """The kernel call: ``entry`` on the call's arrays and the way's jobs. Returns the entry's answer:
    1 when the partner took its part, -1 when a shape or a length is not the plan's (see ``run``)."""
    return entry(*arrays, way.jobs)


def _wavefront(plan, arrays, entry, shared):
    """The layers as a wavefront with the partner thread, when ``shared`` (the plan's, taken) has
    it, or, forced, this thread's own mailbox, which nobody serves (this thread then runs every
    layer). Returns None if it did not run, else whether the partner took its layers."""
    mailbox = shared.mailbox
    if mailbox is None:
        return None
    answer = _enter(entry, arrays, plan.ways.get(("wave", id(mailbox))) or plan.wave(mailbox))
    return None if answer < 0 else answer == 1


def _raced(plan, arrays, entry, shared):
    """A call that can run as a wavefront: as one, or on its layers' own paths, as the plan's race
    says, which is told how long the call took, unless the way found no second thread (a partner
    asleep after a pause, say) and the call ran on one: the time of neither way. ``shared``: the
    partner and second thread the call took (the plan's ``_partner.Shared``)."""
    race = plan.race
    wave = race.wave()
    start = time.perf_counter_ns()
    took = _wavefront(plan, arrays, entry, shared) if wave else None
    if took is None:
        ran = _on_paths(plan, arrays, entry, shared)
        if wave or ran != plan.road.paths:
            return ran
    else:
        ran = ("wave" if took else "serial",) * len(plan.road.paths)
    race.record(wave, time.perf_counter_ns() - start)
    return ran


def shared_for(road):
    """What the calls of a plan of ``road`` take of the partner thread and the budget
    (``_partner.Shared``, taken and released by each call), or None when they take nothing: after
    its ``take``, its ``mailbox`` is the partner's, or, when they do not both come (the partner
    neither spins nor comes, another call has it, or the budget is spent), None, and the call runs
    on its own thread, or, ``road.forced``, the thread's own mailbox, which nobody serves (the
    calling thread then runs the partner's part too). ``road.wake``: the call is long enough to
    wake a sleeping partner; else it takes the partner only if it spins."""
    if road.cut is None and road.needs != "partner":
        return None
    return _partner.Shared(_scratch.mailbox() if road.forced is not None else None)


@functools.lru_cache(maxsize=256)
def direct_ints_of(n_inputs, n_hidden, itemsize):
    """``direct_ints``, computed (and compiled) on the first shared direct call of these sizes only:
    the one-row calls that never share do not pay for its compilation on their first call."""
    return direct_ints(n_inputs, n_hidden, itemsize)


class Race:
    """Whether a call that may run as a wavefront runs as one or on its layers' own paths, for the
    calls of one shape on one thread (a plan's). They run the current way, the wavefront at first;
    the other way has a **trial** of ``TRIAL`` calls in a row after ``_tuning.WAVE_RETRY`` calls of
    the current one, after twice as many each time it loses (up to ``WAVE_RETRY_MAX``), and at once
    when the current way's time grows past ``COLLAPSE`` times the other's. A trial wins, and its
    way becomes the current one, when the median of its times beats the current way's by
    ``MARGIN``. A way's time is the median of its last ``TRIAL`` calls: one slow call does not move
    it, and a trial's first call, which finds the weights in the other way's caches, does not
    decide it. The first call of each way makes its jobs: its time is left out.

    The partner thread shares the second core with whatever else the process runs (another
    runtime's spinning workers, say), and a wavefront, which cannot take back the layers it gave
    the partner, is the way that loses most when that core is busy ("Tuning: a layer
    wavefront"). ``WAVE_RETRY = 0``: always the wavefront."""

    TRIAL, COLLAPSE, MARGIN = 3, 1.25, 0.97

    def __init__(self):
        self.current = True
        self.runs = {True: 0, False: 0}
        self.times = {True: [], False: []}  # ns of each way's last TRIAL calls
        self.every, self.left = _tuning.WAVE_RETRY, self.TRIAL  # the first trial soon
        self.trial = 0  # calls of the other way's trial still to run

    def time(self, wave):
        """The median of the way's last times, or None."""
        times = sorted(self.times[wave])
        return times[(len(times) - 1) // 2] if times else None

    def wave(self):
        """Whether this call runs as a wavefront."""
        if not _tuning.WAVE_RETRY:
            return True
        return self.current != (self.trial > 0)

    def record(self, wave, ns):
        """A call's time: ``wave``, whether it ran as a wavefront."""
        self.runs[wave] += 1
        if self.runs[wave] > 1:
            self.times[wave] = [*self.times[wave][1 - self.TRIAL :], ns]
        if self.trial:
            self.trial -= 1
            if not self.trial:
                self._judge()
            return
        self.left -= 1
        ours, theirs = self.time(self.current), self.time(not self.current)
        if self.left <= 0 or (ours is not None and theirs is not None and ours > self.COLLAPSE * theirs):
            self.trial = self.TRIAL

    def _judge(self):
        ours, theirs = self.time(self.current), self.time(not self.current)
        if theirs is not None and (ours is None or theirs < self.MARGIN * ours):
            self.current, self.every = not self.current, _tuning.WAVE_RETRY
        else:
            self.every = min(2 * self.every, _tuning.WAVE_RETRY_MAX)
        self.left = self.every
