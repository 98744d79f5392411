"""How the SNAC interpreter kernel runs a Schedule: the facts that both the GPU executor
and the simulator's cost model need, stated once.

The GPU executor compiles these into its CUDA source (:func:`cuda_defines` becomes the
``#define`` block NVRTC sees first; the ``.cu`` files hold no copy of the numbers), and
the simulator charges for them (:mod:`purlin.sim.calibration` takes the batch sizes and
the copy alignment from here, not from calibration files). The module lives in
``purlin.snac`` because it describes how an executor runs the IR's instructions, and the
IR package is the only one both sides already depend on: the simulator must not import
the GPU executor (cupy) nor the executor the simulator (simpy).

Examples
--------
>>> SIGNAL_BATCH, PACKET_BATCH, COPY_ALIGN_BYTES
(32, 8, 512)
>>> cuda_defines()["PURLIN_SIGNAL_RUN"]
32
>>> bytes_in_flight(16) // bytes_in_flight(4)
4
"""
from __future__ import annotations

#: threads per CTA of every Purlin kernel
THREADS = 512
#: consecutive Notifies (or Waits) of a CTA run together, one per lane of warp 0: one
#: release (one poll round trip) for all of them
SIGNAL_BATCH = 32
#: consecutive PutPackets of a CTA run together over all its threads: one Atom start
PACKET_BATCH = 8
#: a copy first moves the bytes up to a destination boundary of this many bytes, so the
#: bulk stores land on whole lines (0: off)
COPY_ALIGN_BYTES = 512
#: copies shorter than this are not aligned first
COPY_ALIGN_MIN_BYTES = 4096
#: packet sources a packet reduce loads and settles together
PACKET_REDUCE_BATCH = 4
#: vectors in flight per thread for the plain copies and reduces of the packet kernel
#: (fewer than the plain kernel's, so that no path of that kernel spills)
LEAN_VECTORS = 2
#: vectors in flight per thread of a PutPackets run
PUT_VECTORS = 1
#: 16-byte (or 4-byte) vectors in flight per thread of a plain copy; sources loaded
#: together by a plain reduce
COPY_VECTORS = 8
REDUCE_SOURCES = 8
#: elements in flight per thread on the narrow path (a Ref only 1- or 2-byte aligned)
NARROW_ELEMS = 16
#: the bulk-copy (TMA) pipeline of snac_run_tma: stages x bytes of dynamic shared memory
TMA_STAGES = 4
TMA_STAGE_BYTES = 8192
TMA_SMEM = TMA_STAGES * TMA_STAGE_BYTES
#: pointer-table entries a launch passes by value (8 per rank: W <= 8 needs no table upload,
#: so a call with new buffers binds without a copy, also inside a graph capture)
PARAM_PTRS = 64
#: the widest access of the plain paths (32 on sm_100, where the Atom set says so)
VECTOR_BYTES = 16


def cuda_defines() -> dict[str, int]:
    """The ``#define`` names the CUDA source reads, with their values."""
    return {"PURLIN_SIGNAL_RUN": SIGNAL_BATCH, "PURLIN_PUT_RUN": PACKET_BATCH,
            "PURLIN_DST_ALIGN": COPY_ALIGN_BYTES, "PURLIN_DST_ALIGN_MIN": COPY_ALIGN_MIN_BYTES,
            "PURLIN_PKT_BATCH": PACKET_REDUCE_BATCH, "PURLIN_LEAN": LEAN_VECTORS,
            "PURLIN_PUT_UN": PUT_VECTORS, "PURLIN_COPY_UN": COPY_VECTORS,
            "PURLIN_REDUCE_B": REDUCE_SOURCES, "PURLIN_NARROW_UN": NARROW_ELEMS,
            "PURLIN_TMA_STAGES": TMA_STAGES, "PURLIN_TMA_STAGE_BYTES": TMA_STAGE_BYTES,
            "PURLIN_PARAM_PTRS": PARAM_PTRS}


def bytes_in_flight(width: int) -> int:
    """Bytes one thread of a plain copy keeps in flight when its widest safe access is
    ``width`` bytes (16: vectors; 4: words; 2 or 1: the narrow path). A CTA's copy rate
    is latency-bound (bytes in flight over the memory round trip), so this ratio is what
    an access width costs; the simulator charges it for Refs that are not 16-byte aligned."""
    if width >= 4:
        return min(width, VECTOR_BYTES) * COPY_VECTORS
    return width * NARROW_ELEMS
