# infer.Session: options, the run() forms, dtypes and strides, results against the C++ CLI, outputs'
# ownership, threads and the GIL, and every error path.
import sys
import threading

import numpy as np
import pytest

import infer
from conftest import LENET, EBGAN, SAMPLE, run_tool, tool


def lenet_input(rng, batch=1):
    return rng.uniform(-1, 1, size=(batch, 1, 28, 28)).astype(np.float32)


# --- options ---------------------------------------------------------------------------------------

def test_defaults(lenet):
    s = infer.Session(lenet)
    assert s.batch == 1 and s.precision == "fp32"
    assert s.backend == ("cuda" if infer.cuda_available() else "cpu")
    assert s.inputs[0].shape == (1, 1, 28, 28) and s.outputs[0].shape == (1, 10)
    assert s.model.name == "lenet5"
    assert s.device
    assert s.memory["arena_bytes"] >= s.memory["lower_bound_bytes"] > 0
    assert any(line.startswith("fuse_activation") for line in s.pass_log)
    assert "lenet5" in repr(s)


def test_session_from_path():
    assert infer.Session(str(LENET), backend="cpu", batch=3).inputs[0].shape == (3, 1, 28, 28)


def test_batch_follows_the_input(lenet, rng):
    s = infer.Session(lenet, backend="cpu")
    x = lenet_input(rng, 3)
    out = s.run(x)[0]
    assert out.shape == (3, 10)
    np.testing.assert_array_equal(out, infer.Session(lenet, backend="cpu", batch=3).run(x)[0])
    assert s.batch == 1 and s.inputs[0].shape == (1, 1, 28, 28)  # the session's own plan
    assert s(x[:1]).shape == (1, 10) and s.run(x[:2])[0].shape == (2, 10)
    assert s.profile(x, runs=1).batch == 3


def test_kernels_and_passes(lenet, rng):
    x = lenet_input(rng)
    fused = infer.Session(lenet, backend="cpu")
    assert fused.nodes[0]["op"] == "conv_pool2d" and fused.nodes[0]["fused"] == ["pool1", "tanh1"]
    plain = infer.Session(lenet, backend="cpu", passes={"fuse_conv_avgpool": False, "fuse_activation": False},
                          kernels={"conv2d": "reference"})
    assert plain.nodes[0]["op"] == "conv2d" and plain.nodes[0]["variant"] == "reference"
    assert len(plain.nodes) > len(fused.nodes)
    np.testing.assert_allclose(plain.run(x)[0], fused.run(x)[0], rtol=1e-5, atol=1e-6)


def test_autotune_and_reference_agree(lenet, rng):
    x = lenet_input(rng, 2)
    tuned = infer.Session(lenet, backend="cpu", batch=2, autotune=True).run(x)[0]
    ref = infer.Session(lenet, backend="reference", batch=2).run(x)[0]
    assert all(n["variant"] == "reference" for n in infer.Session(lenet, backend="reference").nodes)
    np.testing.assert_allclose(tuned, ref, rtol=1e-5, atol=1e-6)


def test_plan_cache(lenet, rng, tmp_path):
    cache = tmp_path / "plans.json"
    x = lenet_input(rng, 2)
    tuned = infer.Session(lenet, backend="cpu", batch=2, autotune=True, plan_cache=cache)
    assert cache.exists() and any(p.startswith("autotune: ") for p in tuned.pass_log)
    again = infer.Session(lenet, backend="cpu", batch=2, plan_cache=str(cache))
    assert any(p.startswith("plan cache: ") for p in again.pass_log)
    assert [n["variant"] for n in again.nodes] == [n["variant"] for n in tuned.nodes]
    np.testing.assert_allclose(again.run(x)[0], tuned.run(x)[0], rtol=1e-6, atol=1e-7)
    (tmp_path / "bad.json").write_text("not json")
    with pytest.raises(infer.Error, match="not JSON"):
        infer.Session(lenet, backend="cpu", autotune=True, plan_cache=tmp_path / "bad.json")
    assert (tmp_path / "bad.json").read_text() == "not json"


def test_extra_outputs(lenet, rng):
    hidden = lenet.nodes[-2]["outputs"][0]  # the last hidden dense layer's activations
    s = infer.Session(lenet, backend="cpu", batch=2, extra_outputs=[hidden])
    assert [o.name for o in s.outputs] == [lenet.outputs[0].name, hidden]
    x = lenet_input(rng, 2)
    logits, features = s.run(x)
    np.testing.assert_array_equal(logits, infer.Session(lenet, backend="cpu", batch=2).run(x)[0])
    assert features.shape == (2, 84) and np.abs(features).max() <= 1  # after tanh
    with pytest.raises(infer.Error, match="nope"):
        infer.Session(lenet, extra_outputs=["nope"])


@pytest.mark.parametrize("kwargs, match", [
    ({"backend": "tpu"}, "tpu"),
    ({"precision": "fp8"}, "fp8"),
    ({"batch": -3}, "batch"),
    ({"kernels": {"conv2d": "magic"}}, "magic"),
    ({"kernels": {"nonsense_op": "reference"}}, "nonsense_op"),
    ({"passes": {"no_such_pass": False}}, "no_such_pass"),
])
def test_bad_options(lenet, kwargs, match):
    with pytest.raises(infer.Error, match=match):
        infer.Session(lenet, **kwargs)


def test_device_on_cpu(lenet, rng):
    """device= (SessionOptions::device): the cpu backend has one device, 0; a GPU ordinal is an Error."""
    x = lenet_input(rng)
    want = infer.Session(lenet, backend="cpu").run(x)[0]
    for device in (None, 0):
        np.testing.assert_array_equal(infer.Session(lenet, backend="cpu", device=device).run(x)[0], want)
    with pytest.raises(infer.Error, match="device 1 selects a GPU"):
        infer.Session(lenet, backend="cpu", device=1)
    with pytest.raises(infer.Error, match="device must be >= 0"):
        infer.Session(lenet, backend="reference", device=-2)


def test_fp16_needs_cuda(lenet):
    if infer.cuda_available():
        pytest.skip("a GPU is present: fp16 is valid on the auto backend")
    with pytest.raises(infer.Error):
        infer.Session(lenet, precision="fp16")


def test_wrong_option_types(lenet):
    with pytest.raises(TypeError):
        infer.Session(lenet, batch="four")
    with pytest.raises(TypeError):
        infer.Session(12345)  # neither a Model nor a path


# --- run forms -------------------------------------------------------------------------------------

def test_run_forms_agree(lenet, rng):
    s = infer.Session(lenet, backend="cpu")
    x = lenet_input(rng)
    (a,) = s.run(x)
    assert a.shape == (1, 10) and a.dtype == np.float32
    np.testing.assert_array_equal(s.run({"image": x})[0], a)
    np.testing.assert_array_equal(s.run([x])[0], a)
    np.testing.assert_array_equal(s.run((x,))[0], a)
    np.testing.assert_array_equal(s(x), a)


def test_outputs_are_owned_and_writable(lenet, rng):
    s = infer.Session(lenet, backend="cpu")
    x = lenet_input(rng)
    first = s.run(x)[0]
    keep = first.copy()
    second = s.run(-x)[0]  # a new run must not write into the first result
    np.testing.assert_array_equal(first, keep)
    assert not np.array_equal(first, second)
    first[0, 0] = 42.0
    del s
    assert first[0, 0] == 42.0 and first.flags.c_contiguous and first.flags.writeable


def test_run_into_reused_buffers(lenet, rng):
    s = infer.Session(lenet, backend="cpu")
    x = lenet_input(rng, 5)
    want = s.run(x)[0]
    buf = np.full((5, 10), np.nan, np.float32)  # poisoned
    out = s.run(x, out=[buf])
    assert out[0] is buf
    np.testing.assert_array_equal(buf, want)
    buf[:] = 7.0
    s.run({"image": x}, out=[buf])  # the same buffer again, the dict form
    np.testing.assert_array_equal(buf, want)
    keep = buf.copy()
    for bad, match in [
        ([np.empty((4, 10), np.float32)], "needs shape 5x10, got 4x10"),
        ([np.empty((5, 10), np.float64)], "float32 C-contiguous"),
        ([np.empty((10, 5), np.float32).T], "float32 C-contiguous"),
        ([], "expected 1 output buffer"),
        ([buf, buf], "expected 1 output buffer"),
    ]:
        with pytest.raises(infer.Error, match=match):
            s.run(x, out=bad)
    ro = np.empty((5, 10), np.float32)
    ro.flags.writeable = False
    with pytest.raises(infer.Error, match="read-only"):
        s.run(x, out=[ro])
    with pytest.raises(infer.Error, match="exclude each other"):
        s.run(x, out=[buf], device_outputs=True)
    np.testing.assert_array_equal(buf, keep)  # nothing written by a refused call


@pytest.mark.parametrize("args, match", [
    ((), "1 input"),
    ((np.zeros((1, 1, 28, 28), np.float32),) * 2, "2"),
    (({"images": np.zeros((1, 1, 28, 28), np.float32)},), "unknown input 'images'"),
    (({},), "missing input 0 'image'"),
    ((np.zeros((1, 28, 28), np.float32),), "expected shape 1x1x28x28, got 1x28x28"),
    ((np.zeros((2, 1, 28, 27), np.float32),), "got 2x1x28x27"),
    ((np.zeros((1, 1, 28, 28), np.complex64),), "complex64"),
    ((np.array([["a"]]),), "not supported"),
    ((np.zeros((1, 1, 28, 28), bool),), "bool"),
    ((object(),), "image"),
    (("a string",), "image"),
])
def test_run_errors(lenet, args, match):
    s = infer.Session(lenet, backend="cpu")
    with pytest.raises(infer.Error, match=match):
        s.run(*args)


def test_device_outputs_needs_cuda(lenet):
    s = infer.Session(lenet, backend="cpu")
    with pytest.raises(infer.Error, match="device_outputs=True needs the inputs on the GPU"):
        s.run(s.random_inputs()[0], device_outputs=True)


# --- dtypes and strides: converted in order, never read wrongly ------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.uint8, np.int64, ">f4", "<f8"])
def test_dtypes_convert(lenet, dtype):
    s = infer.Session(lenet, backend="cpu")
    x = np.arange(784).reshape(1, 1, 28, 28) % 7  # exact in every dtype below
    want = s.run(x.astype(np.float32))[0]
    np.testing.assert_array_equal(s.run(x.astype(dtype))[0], want)


def test_non_contiguous_inputs(lenet, rng):
    s = infer.Session(lenet, backend="cpu")
    big = rng.standard_normal((2, 3, 56, 56)).astype(np.float32)
    views = {
        "strided": big[1:, 1:2, ::2, ::2],
        "transposed": big[:1, :1, :28, :28].transpose(0, 1, 3, 2),
        "fortran": np.asfortranarray(big[:1, :1, :28, :28]),
        "negative": big[:1, :1, 27::-1, :28],
    }
    for name, v in views.items():
        assert v.shape == (1, 1, 28, 28), name
        np.testing.assert_array_equal(s.run(v)[0], s.run(np.ascontiguousarray(v))[0], err_msg=name)


def test_buffer_protocol_and_array_interface(lenet, rng):
    s = infer.Session(lenet, backend="cpu")
    x = lenet_input(rng)
    want = s.run(x)[0]
    np.testing.assert_array_equal(s.run(memoryview(x))[0], want)

    class ArrayLike:
        def __array__(self, dtype=None):
            return x

    np.testing.assert_array_equal(s.run(ArrayLike())[0], want)
    # A top-level list is the list of inputs; a nested list inside it is data.
    np.testing.assert_array_equal(s.run([x.tolist()])[0], want)


# --- results against the C++ CLI --------------------------------------------------------------------

def test_same_as_cli_on_npy(lenet, rng, tmp_path):
    x = lenet_input(rng, 4)
    np.save(tmp_path / "x.npy", x)
    run_tool(tool("infer"), "--model", LENET, "--backend", "cpu", "--batch", 4, "--input",
             tmp_path / "x.npy", "--out", tmp_path / "y.npy")
    np.testing.assert_array_equal(infer.Session(lenet, backend="cpu", batch=4).run(x)[0],
                                  np.load(tmp_path / "y.npy"))


@pytest.mark.parametrize("path, seed", [(EBGAN, 3), (LENET, 5)])
def test_random_inputs_match_cli(path, seed, tmp_path):
    # The CLI draws z (generator) or uniform [-1,1) inputs from --seed; random_inputs() is that code.
    run_tool(tool("infer"), "--model", path, "--backend", "cpu", "--batch", 2, "--seed", seed,
             "--out", tmp_path / "y.npy")
    s = infer.Session(path, backend="cpu", batch=2)
    z = s.random_inputs(seed)
    assert z[0].shape == s.inputs[0].shape
    if s.model.task == "generator":
        assert abs(float(z[0].mean())) < 0.5 and 0.5 < float(z[0].std()) < 1.5
    else:
        assert z[0].min() >= -1 and z[0].max() < 1
    np.testing.assert_array_equal(s.run(z)[0], np.load(tmp_path / "y.npy"))
    assert not np.array_equal(s.random_inputs(seed + 1)[0], z[0])
    with pytest.raises(infer.Error, match="seed"):
        s.random_inputs(-1)


def test_load_image_matches_cli(lenet, tmp_path):
    x = infer.load_image(SAMPLE, lenet)
    assert x.shape == (1, 1, 28, 28)
    out = run_tool(tool("infer"), "--model", LENET, "--backend", "cpu", "--input", SAMPLE)
    assert "Ankle boot" in out.splitlines()[2]
    assert int(infer.Session(lenet, backend="cpu")(x).argmax()) == 9
    with pytest.raises(infer.Error):
        infer.load_image(tmp_path / "missing.png", lenet)
    with pytest.raises(infer.Error, match="4-D"):
        infer.load_image(SAMPLE, _dense_model(tmp_path))


def _dense_model(tmp_path):
    """A model with a 2-D input (dense only), through the ONNX importer."""
    torch = pytest.importorskip("torch")
    net = torch.nn.Linear(4, 2).eval()
    torch.onnx.export(net, torch.zeros(1, 4), tmp_path / "d.onnx", input_names=["x"],
                      output_names=["y"], opset_version=13)
    return infer.onnx.convert(tmp_path / "d.onnx")


def test_save_grid(tmp_path, rng):
    imgs = rng.uniform(-1, 1, size=(4, 1, 8, 8)).astype(np.float32)
    infer.save_grid(tmp_path / "g.png", imgs)
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(infer.Error, match="images must be"):
        infer.save_grid(tmp_path / "g.png", imgs[0])
    with pytest.raises(infer.Error, match="lo < hi"):
        infer.save_grid(tmp_path / "g.png", imgs, 1.0, -1.0)
    with pytest.raises(infer.Error):
        infer.save_grid(tmp_path / "no" / "such" / "dir.png", imgs)


# --- threads and the GIL ----------------------------------------------------------------------------

def test_one_session_per_thread_shared_model(lenet, rng):
    xs = [lenet_input(rng, 2) for _ in range(4)]
    want = [infer.Session(lenet, backend="cpu", batch=2).run(x)[0] for x in xs]
    got = [None] * 4
    errors = []

    def work(i):
        try:
            s = infer.Session(lenet, backend="cpu", batch=2)
            for _ in range(20):
                got[i] = s.run(xs[i])[0]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_shared_session_takes_turns(lenet, rng):
    s = infer.Session(lenet, backend="cpu", batch=2)
    xs = [lenet_input(rng, 2) for _ in range(3)]
    want = [s.run(x)[0] for x in xs]
    bad = []

    def work(i):
        for _ in range(30):
            if not np.array_equal(s.run(xs[i])[0], want[i]):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_gil_released_during_run(ebgan):
    # With a huge switch interval a thread holding the GIL is never preempted, so the main thread's
    # counter can only move while run() is in progress if run() released the GIL.
    s = infer.Session(ebgan, backend="reference", batch=4)
    z = s.random_inputs()
    counter = [0]
    seen = {}
    done = threading.Event()

    def work():
        seen["before"] = counter[0]
        s.run(z)
        seen["after"] = counter[0]
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        t = threading.Thread(target=work)
        t.start()
        while not done.is_set():
            counter[0] += 1
            done.wait(0.001)
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert seen["after"] - seen["before"] >= 3
