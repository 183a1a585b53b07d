"""Every tuning constant of fastgru in one table: what it decides, in a line, and what justifies it.

The measurements behind each value are in ``docs/tuning.md`` and the CHANGELOG;
the tests named here keep each choice honest (they patch these values to reach every path). The
dispatcher reads them as ``_tuning.NAME`` at every call, so a test or an experiment can change
them at run time; the kernels read the geometry once, when they compile.

FLOPs below are those of the matrix products, 2·N·S·D·3H·(I + H).
"""

import os
import sys
import types
from dataclasses import dataclass

# ------------------------------------------------------------------------------- kernel paths
#: Below this many FLOPs a call runs on the calling thread: a parallel region costs more than the
#: work it would share (docs/tuning.md, "Tuning: serial or parallel"; tests/test_kernel_paths.py).
SERIAL_BELOW_FLOPS = 6_000_000

#: A task computes X·Wᵀ + bias for all its rows and steps up front when that fits in this many
#: bytes (it stays in L2), else one step at a time ("Tuning: hoisting").
HOIST_BYTES = 1 << 20

#: Without the partner thread, a single row is split over two threads of a parallel region from
#: this hidden_size and this many steps on ("Tuning: one row on two threads").
SPLIT_FROM_HIDDEN = 256
SPLIT_FROM_STEPS = 16

#: With the partner thread, a single row shares its work from this hidden_size and this many FLOPs
#: on, a one-step cell included ("Tuning: the partner thread"; tests/test_partner.py).
PAIR_FROM_HIDDEN = 128
PAIR_FROM_FLOPS = 400_000

#: A one-row call of at least this many FLOPs (about 1 ms of one core) wakes a sleeping partner
#: before it starts instead of running alone: the cold partner then gains more than it costs
#: ("Tuning: the partner thread").
PAIR_WAKE_FLOPS = 150_000_000

# ------------------------------------------------------------------------------- memory
#: Scratch up to this many bytes is kept per Python thread and reused by its next calls; a larger
#: one is allocated for its call only ("Tuning: memory"; tests/test_allocation.py).
KEEP_SCRATCH_BYTES = 4 << 20

#: Rows whose products run together, weight panels outermost: each panel is read once per chunk
#: and step while it is in cache (64 rows of C are at most 3·64·H floats).
CHUNK_ROWS = 64

#: In a stack's wavefront, the layer that waits for the one before it computes X·Wᵀ + bias this
#: many steps at a time, once they are there, when its call hoists the projection: each panel of
#: W then serves as many rows ("Tuning: a layer wavefront").
WAVE_STEPS = 16

# ------------------------------------------------------------------------------- two threads
#: Spins a split worker waits for its partner to take its own half of an item before doing it
#: itself: a few microseconds, far less than a step worth splitting.
PATIENCE_SPINS = 2000

#: Microseconds the partner thread spins without a job before it sleeps (FASTGRU_SPIN_US).
SPIN_US = 1000


def core_l2_bytes(cpu="/sys/devices/system/cpu/cpu0/cache"):
    """One core's second-level cache in bytes, as Linux's sysfs says; 1 MiB when it does not."""
    try:
        for index in sorted(os.listdir(cpu)):
            with open(os.path.join(cpu, index, "level")) as level:
                if level.read().strip() != "2":
                    continue
            with open(os.path.join(cpu, index, "size")) as size:
                text = size.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
            return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return 1 << 20


#: A stack's layers run as a wavefront (a row's layers split between the calling thread and the
#: partner, ``_kernels/entry.py``) only when each thread's part of the packed weights fits in this
#: many bytes, one core's L2: else the split of each row, whose halves do ("Tuning: a layer
#: wavefront"; tests/test_stack.py).
WAVE_MAX_BYTES = core_l2_bytes()

#: A call that may run as a wavefront runs as one or on its layers' own paths, whichever took less
#: time over its recent calls of that shape; the other is tried again after WAVE_RETRY calls, twice
#: as many each time it loses again, up to WAVE_RETRY_MAX ("Tuning: a layer wavefront";
#: ``_stack._Race``). WAVE_RETRY 0: always the wavefront.
WAVE_RETRY = 16
WAVE_RETRY_MAX = 1024


# ------------------------------------------------------------------------------- geometries
@dataclass(frozen=True)
class Geometry:
    """The shape of the register-tiled matrix product (``_kernels/microkernel.py``) for one ISA.

    A tile of C is ``rows`` rows by ``panels`` panels of ``panel_vectors`` vectors of
    ``vector_bytes``: rows·panels·panel_vectors accumulators, which must fit the vector registers
    with the panel's vectors and a broadcast beside them. ``tiles`` lists the (rows, panels) tiles
    the products use, largest first; the last has one row (a row tail, or batch 1).
    """

    name: str
    vector_bytes: int
    registers: int
    panel_vectors: int
    tiles: tuple
    requires: tuple  # CPU features (LLVM's names) the target must have
    note: str

    def panel_width(self, itemsize):
        """Columns of one packed weight panel for elements of ``itemsize`` bytes."""
        return self.panel_vectors * self.vector_bytes // itemsize

    def float32_tiles(self):
        """The tiles as rows x columns of float32, e.g. "8x32 4x64 1x128"."""
        return " ".join(f"{rows}x{panels * self.panel_width(4)}" for rows, panels in self.tiles)


#: The geometries, by FASTGRU_ISA name. Measured in docs/tuning.md ("Tuning: geometries").
GEOMETRIES = {
    "avx512": Geometry(
        "avx512",
        64,
        32,
        2,
        ((8, 1), (4, 2), (1, 4)),
        ("avx512f",),
        "8 rows x 2 zmm: 16 of 32 registers accumulate",
    ),
    "avx2": Geometry(
        "avx2",
        32,
        16,
        2,
        ((6, 1), (4, 1), (1, 4)),
        ("avx2", "fma"),
        "6 rows x 2 ymm: 12 of 16 registers accumulate",
    ),
    "generic": Geometry(
        "generic",
        16,
        16,
        2,
        ((6, 1), (4, 1), (1, 4)),
        (),
        "6 rows x 2 16-byte vectors (SSE2, NEON): 12 accumulators",
    ),
}


# ------------------------------------------------------------------------------- changes
class _Table(types.ModuleType):
    """This module, counting its changes in GENERATION: a plan (``_plan.py``) made under other values
    of the table is made again (a test or an experiment sets them at run time)."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name != "GENERATION":
            super().__setattr__("GENERATION", self.GENERATION + 1)


GENERATION = 0
sys.modules[__name__].__class__ = _Table
