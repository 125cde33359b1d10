"""A host-only stand-in for the parts of ttnn's Python API that the worker's graph ops use (tests only:
worker_replay_tests.rs). Tensors are numpy arrays with an allocated flag; a program is run by copying its
first tensor into its second (enough for a relayout step whose source and destination have one shape), taking
the time `launches` says; a program over a released tensor fails, as a device would read or write memory no
longer its own."""
import numpy as _np

bfloat16, float32, bfloat8_b, bfloat4_b, uint8, uint32 = "bf16", "f32", "bfp8_b", "bfp4_b", "u8", "u32"
TILE_LAYOUT, ROW_MAJOR_LAYOUT, DRAM_MEMORY_CONFIG = "tile", "row_major", "dram"


class Shape(list):
    pass


class CoreCoord:
    def __init__(self, x, y):
        self.x, self.y = x, y


class _Grid:
    x, y = 13, 10


class _Device:
    def compute_with_storage_grid_size(self):
        return _Grid()

    def dram_grid_size(self):
        return _Grid()

    def arch(self):
        return "stand-in"

    def worker_core_from_logical_core(self, c):
        return CoreCoord(c.x + 1, c.y + 2)


_next_address = [4096]


class Tensor:
    def __init__(self, data, dtype, device=None, layout=None, memory_config=None):
        self.data = _np.array(data, dtype=_np.float32)
        self.shape = list(self.data.shape)
        self.dtype, self.on_device, self.allocated = dtype, device is not None, True
        self.address = _next_address[0]
        _next_address[0] += self.data.nbytes

    def is_allocated(self):
        return self.allocated

    def buffer_address(self):
        return self.address

    def to_numpy(self):
        return self.data.copy()


def GetNumAvailableDevices():
    return 1


def open_device(device_id=0):
    return _Device()


def close_device(dev):
    pass


def allocate_tensor_on_device(shape, dtype, layout, dev, memory_config):
    return Tensor(_np.zeros(list(shape), _np.float32), dtype, dev)


def copy_host_to_device_tensor(host, dev_tensor):
    if not dev_tensor.allocated:
        raise RuntimeError("copy into a released tensor")
    dev_tensor.data[...] = host.data


def deallocate(t):
    t.allocated = False


def from_device(t):
    if not t.allocated:
        raise RuntimeError("read of a released tensor")
    return Tensor(t.data, t.dtype)


def to_dtype(t, dtype):
    return Tensor(t.data, dtype)


# What each launch does besides its copy, in order (a test sets it): seconds it takes, or "stop": the worker
# stops itself (SIGSTOP) inside the program, as a hung device program would leave it.
launches = []


def generic_op(tensors, program):
    released = [i for i, t in enumerate(tensors) if not t.allocated]
    if released:
        raise RuntimeError(f"a program over released tensors (positions {released})")
    if launches:
        what = launches.pop(0)
        if what == "stop":
            import os, signal
            os.kill(os.getpid(), signal.SIGSTOP)
        else:
            import time
            time.sleep(what)
    tensors[1].data[...] = tensors[0].data


def synchronize_device(dev):
    pass


class RuntimeArgs(dict):
    def __missing__(self, key):
        self[key] = {}
        return self[key]


class TensorAccessorArgs:
    def __init__(self, t):
        self.t = t

    def get_compile_time_args(self):
        return [0]


class _Record:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class CoreRange(_Record):
    pass


class CoreRangeSet(_Record):
    pass


class CBDescriptor(_Record):
    pass


class CBFormatDescriptor(_Record):
    pass


class ProgramDescriptor(_Record):
    pass


class ReaderConfigDescriptor(_Record):
    pass


class KernelDescriptor(_Record):
    class SourceType:
        SOURCE_CODE = "source"


class WriterConfigDescriptor(_Record):
    pass


class ComputeConfigDescriptor(_Record):
    pass


class SemaphoreDescriptor(_Record):
    pass


class CoreType:
    WORKER = "worker"


class MathFidelity:
    LoFi, HiFi2, HiFi3, HiFi4 = "LoFi", "HiFi2", "HiFi3", "HiFi4"


class UnpackToDestMode:
    Default, UnpackToDestFp32 = "default", "fp32"
