"""A state pool's marks (``_codes.CLOSED``, ``IDLE``, ``HELD`` per stream id), claimed and released
for a step in one compiled pass each (64 ids took 8.8 µs as eight NumPy calls). The pool calls
these under its lock; on a refusal ``_validate.check_claim`` says which id is wrong and why."""

from .._codes import HELD, IDLE
from .._config import kernel


@kernel()
def claim(marks, ids):
    """Mark every id HELD if each is in range, IDLE (open, held by no step) and listed once (a
    repeat finds its own earlier mark); returns True. Otherwise leaves ``marks`` as they were and
    returns False."""
    capacity = marks.shape[0]
    for k in range(ids.shape[0]):
        i = ids[k]
        if i < 0 or i >= capacity or marks[i] != IDLE:
            for j in range(k):
                marks[ids[j]] = IDLE
            return False
        marks[i] = HELD
    return True


@kernel()
def release(marks, ids):
    """Mark the claimed ``ids`` IDLE again."""
    for k in range(ids.shape[0]):
        marks[ids[k]] = IDLE
