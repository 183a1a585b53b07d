"""A race between two ways of running the calls of one shape, decided by their measured times.

Where the faster way depends on what else the process runs, fastgru measures instead of guessing:
a stack's layers as a wavefront or on their own paths (``_stack``), a torch model's one-row GRU
with fastgru's partner thread or alone (``fastgru.torch``). Both lose most when something else
holds the second core, which no rule of shapes can know.
"""


class Race:
    """Which of two ways, True or False, the next call of one shape on one thread runs. Calls run the
    current way, ``first`` at the start; the other way has a **trial** of ``trial`` calls in a row
    after ``retry`` calls of the current one, after twice as many each time it loses (up to
    ``retry_max``), and at once when the current way's time grows past ``collapse`` times the
    other's (None: never). A trial wins, and its way becomes the current one, when the median of
    its times is below ``margin`` times the current way's. A way's time is the median of its last
    ``KEPT`` calls: one slow call does not move it, and a trial's first call, which finds the
    weights in the other way's caches, does not decide it; a longer trial leaves out more of its
    first calls, for a way that takes a few calls to reach its pace. The first call of each way
    makes its jobs: its time is left out.

    ``retries()`` gives (retry, retry_max), read from ``_tuning`` at each decision (tests and
    experiments change it at run time); retry 0: always ``first``.

    A call's time is given to ``record`` (its duration, say), or measured by ``start`` and ``end``
    around the call: from its start to the next call's start (its **lap**, which holds what the
    caller did between the calls too, so that what a way costs the work around it counts) when that
    is at most ``longest`` ns, else (a pause between the calls) from its start to its end.
    """

    KEPT = 3

    def __init__(self, first, retries, trial=3, margin=0.97, collapse=1.25):
        self.first = self.current = first
        self.retries, self.trial_calls, self.margin, self.collapse = retries, trial, margin, collapse
        self.runs = {True: 0, False: 0}
        self.times = {True: [], False: []}  # ns of each way's last KEPT calls
        self.every, self.left = retries()[0], self.KEPT  # the first trial soon
        self.trial = 0  # calls of the other way's trial still to run
        self._last = None  # [start, way, end] of the previous call, for ``start`` and ``end``
        self.changed = False  # whether the call ``start`` began runs another way than the one before

    def time(self, way):
        """The median of the way's last times, or None."""
        times = sorted(self.times[way])
        return times[(len(times) - 1) // 2] if times else None

    def way(self):
        """The way this call runs."""
        if not self.retries()[0]:
            return self.first
        return self.current != (self.trial > 0)

    def start(self, ns, longest):
        """A call starts at ``ns`` (``perf_counter_ns``): the previous one's time is recorded (its lap,
        or its duration when the lap is longer than ``longest``). Returns this call's way."""
        last = self._last
        if last is not None and last[2] is not None:
            self.record(last[1], ns - last[0] if ns - last[0] <= longest else last[2] - last[0])
        way = self.way()
        self.changed = last is not None and way != last[1]
        self._last = [ns, way, None]
        return way

    def end(self, ns):
        """The call ``start`` began ended at ``ns``."""
        self._last[2] = ns

    def record(self, way, ns):
        """The time of a call that ran ``way``."""
        self.runs[way] += 1
        if self.runs[way] > 1:
            self.times[way] = [*self.times[way][1 - self.KEPT :], ns]
        if self.trial:
            self.trial -= 1
            if not self.trial:
                self._judge()
            return
        self.left -= 1
        ours, theirs = self.time(self.current), self.time(not self.current)
        collapsed = self.collapse is not None and ours is not None and theirs is not None
        if self.left <= 0 or (collapsed and ours > self.collapse * theirs):
            self.trial = self.trial_calls

    def _judge(self):
        retry, retry_max = self.retries()
        ours, theirs = self.time(self.current), self.time(not self.current)
        if theirs is not None and (ours is None or theirs < self.margin * ours):
            self.current, self.every = not self.current, retry
        else:
            self.every = min(2 * self.every, retry_max)
        self.left = self.every
