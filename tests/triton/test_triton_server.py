# The real Triton Inference Server (PyPI's nvidia-pytriton, in .venv-triton) serving a repository that
# `python -m infer.triton repo` wrote, on the CPU (issue 29 must 3). Outputs over HTTP and gRPC must
# equal the `infer` CLI's for the same inputs: bit for bit where the server runs the batch the CLI runs
# (a request alone, at a planned bucket, or padded to one as the CLI is given it), within 1e-5 where
# the dynamic batcher merged requests (the engine may sum in another order at another batch); bad requests (wrong shape, wrong dtype,
# oversized batch, garbage bytes) must each get an error while the server keeps serving; a bounded soak
# at a fixed load has zero failed or wrong responses and flat server memory; the server stops cleanly.
# Run by ctest through tests/triton/run.sh (which installs the wheels or skips, saying why).
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import psutil
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import infer
import infer.triton as triton

SOURCE = pathlib.Path(os.environ.get("INFER_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BINARY = pathlib.Path(os.environ.get("INFER_BINARY_DIR", SOURCE / "build"))
EBGAN = SOURCE / "models" / "ebgan_fashion.fb"
LENET = SOURCE / "models" / "lenet5_fashion.fb"
SAMPLE = SOURCE / "models" / "samples" / "fashion_mnist_test_0000_ankle_boot.png"
SOAK_SECONDS = float(os.environ.get("INFER_TRITON_SOAK_SECONDS", "30"))
MAX_BATCH = 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args):
    """The `infer` CLI's run (cpu backend); fails the test with its stderr on a non-zero exit."""
    env = dict(os.environ, OMP_NUM_THREADS="1")  # as the server's instances run (summation order)
    p = subprocess.run([str(BINARY / "infer"), "--backend", "cpu", *map(str, args)], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0, f"infer {args} exited {p.returncode}: {p.stderr}"


def cli_outputs(tmp, model, x, name):
    """What `infer --model MODEL --input x.npy --out y.npy` writes for input x."""
    np.save(tmp / f"{name}_in.npy", x)
    cli("--model", model, "--input", tmp / f"{name}_in.npy", "--out", tmp / f"{name}_out.npy")
    return np.load(tmp / f"{name}_out.npy")


class Server:
    def __init__(self, tmp):
        self.tmp = tmp
        self.repo = tmp / "repo"
        names = triton.write_repository([str(EBGAN), str(LENET)], str(self.repo), max_batch=MAX_BATCH,
                                        preferred=[4, 8], queue_delay_us=2000, kind="cpu")
        assert names == ["ebgan_fashion", "lenet5_fashion"]
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        argv, env = triton.server_command(str(self.repo), str(tmp / "work"), self.http_port, self.grpc_port,
                                          self.metrics_port)
        env["OMP_NUM_THREADS"] = "1"  # two stub processes on CI's two cores; the CLI runs alike
        self.log_path = tmp / "tritonserver.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.http = httpclient.InferenceServerClient(f"127.0.0.1:{self.http_port}")
        self.grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")
        deadline = time.time() + 90
        while True:
            assert self.proc.poll() is None, f"tritonserver exited {self.proc.returncode}:\n{self.tail()}"
            try:
                if all(self.http.is_model_ready(n) for n in names):
                    break
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            assert time.time() < deadline, f"tritonserver not ready after 90 s:\n{self.tail()}"
            time.sleep(0.25)

    def tail(self, n=40):
        if not self.log.closed:
            self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def rss(self):
        """Resident bytes of tritonserver and its Python backend stubs (one process per instance)."""
        p = psutil.Process(self.proc.pid)
        return sum(q.memory_info().rss for q in [p] + p.children(recursive=True))

    def stop(self):
        """SIGTERM as an orchestrator sends it; returns the exit status and the stubs left behind.
        Clients close their keep-alive connections first: Triton waits for open ones (exit timeout)."""
        self.http.close()
        self.grpc.close()
        children = psutil.Process(self.proc.pid).children(recursive=True)
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = "hung"
        time.sleep(0.5)
        left = [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        self.log.close()
        return code, left


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("triton"))
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()


def http_infer(client, model, x, out_name, dtype="FP32"):
    i = httpclient.InferInput("z" if model == "ebgan_fashion" else "image", list(x.shape), dtype)
    i.set_data_from_numpy(x, binary_data=True)
    return client.infer(model, [i]).as_numpy(out_name)


def grpc_infer(client, model, x, out_name, dtype="FP32"):
    i = grpcclient.InferInput("z" if model == "ebgan_fashion" else "image", list(x.shape), dtype)
    i.set_data_from_numpy(x)
    return client.infer(model, [i]).as_numpy(out_name)


def close(y, want):
    """Equal within float rounding: merged requests run at another batch than the CLI's."""
    return y.shape == want.shape and np.allclose(y, want, rtol=1e-5, atol=1e-5)


def out_name(model):
    return infer.load(EBGAN if model == "ebgan_fashion" else LENET).outputs[0].name


def test_config_from_model(server):
    cfg = server.http.get_model_config("ebgan_fashion")
    assert cfg["max_batch_size"] == MAX_BATCH
    assert [int(d) for d in cfg["input"][0]["dims"]] == [100, 1, 1]
    assert [int(d) for d in cfg["output"][0]["dims"]] == [1, 64, 64]
    assert cfg["dynamic_batching"]["preferred_batch_size"] == [4, 8]
    assert cfg["instance_group"][0]["kind"] == "KIND_CPU"
    assert cfg["parameters"]["precision"]["string_value"] == "fp32"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("rows", [4, 3])
def test_generator_equals_cli(server, protocol, rows):
    """4 rows run at the bucket 4 as the CLI runs them; 3 rows are padded with a zero row to the bucket
    4, so the CLI gets the same 4 rows and its first 3 must be the response, bit for bit."""
    z = np.random.default_rng(3).standard_normal((rows, 100, 1, 1)).astype(np.float32)
    f = http_infer if protocol == "http" else grpc_infer
    y = f(server.http if protocol == "http" else server.grpc, "ebgan_fashion", z, out_name("ebgan_fashion"))
    padded = np.concatenate([z, np.zeros((4 - rows, 100, 1, 1), np.float32)])
    want = cli_outputs(server.tmp, EBGAN, padded, f"ebgan_{protocol}_{rows}")[:rows]
    assert y.shape == (rows, 1, 64, 64) and y.dtype == np.float32
    assert np.array_equal(y, want), f"max |diff| {np.abs(y - want).max()}"
    assert -1 <= y.min() < y.max() <= 1 and y.std() > 0.1  # a tanh image, not zeros


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_classifier_equals_cli(server, protocol):
    x = infer.load_image(str(SAMPLE), infer.load(LENET))
    f = http_infer if protocol == "http" else grpc_infer
    y = f(server.http if protocol == "http" else server.grpc, "lenet5_fashion", x, out_name("lenet5_fashion"))
    want = cli_outputs(server.tmp, LENET, x, f"lenet_{protocol}")
    assert np.array_equal(y, want)
    assert int(y[0].argmax()) == 9 and y[0, 9] > 0.99  # the ankle boot


def test_concurrent_requests_batched_and_equal(server):
    """Requests of 1 and 2 rows from 6 threads at once: the dynamic batcher merges them (2 ms queue
    delay); every response must still be its own rows, as the CLI computes them."""
    z = np.random.default_rng(5).standard_normal((9, 100, 1, 1)).astype(np.float32)
    parts = [(0, 1), (1, 3), (3, 4), (4, 6), (6, 7), (7, 9)]
    want = cli_outputs(server.tmp, EBGAN, z, "ebgan_concurrent")
    got, errors = {}, []

    def send(a, b):
        try:
            c = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
            got[a] = http_infer(c, "ebgan_fashion", z[a:b], out_name("ebgan_fashion"))
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=send, args=p) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for a, b in parts:
        assert close(got[a], want[a:b]), f"rows {a}:{b}"
    stats = server.http.get_inference_statistics("ebgan_fashion")["model_stats"][0]
    assert int(stats["inference_count"]) > int(stats["execution_count"])  # some requests ran together


def serves(server):
    """One good request on each protocol after a bad one: the server is still serving, correctly."""
    x = infer.load_image(str(SAMPLE), infer.load(LENET))
    a = http_infer(server.http, "lenet5_fashion", x, out_name("lenet5_fashion"))
    b = grpc_infer(server.grpc, "lenet5_fashion", x, out_name("lenet5_fashion"))
    assert np.array_equal(a, b) and int(a[0].argmax()) == 9
    assert server.proc.poll() is None


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("case", ["wrong_shape", "wrong_rank", "wrong_dtype", "oversized_batch",
                                  "unknown_model", "wrong_input_name"])
def test_bad_request_gets_error(server, protocol, case):
    client, mod = (server.http, httpclient) if protocol == "http" else (server.grpc, grpcclient)
    name, shape, dtype, data = "z", [1, 100, 1, 1], "FP32", None
    model = "ebgan_fashion"
    if case == "wrong_shape":
        shape = [1, 99, 1, 1]
    elif case == "wrong_rank":
        shape = [1, 100]
    elif case == "wrong_dtype":
        dtype, data = "INT32", np.zeros(shape, np.int32)
    elif case == "oversized_batch":
        shape = [MAX_BATCH + 1, 100, 1, 1]
    elif case == "unknown_model":
        model = "no_such_model"
    elif case == "wrong_input_name":
        name = "latent"
    i = mod.InferInput(name, shape, dtype)
    if data is None:
        data = np.zeros(shape, np.float32)
    i.set_data_from_numpy(data)
    with pytest.raises(InferenceServerException):
        client.infer(model, [i])
    serves(server)


@pytest.mark.parametrize("body", [b"", b"\x00\xff garbage \x13\x37" * 64, b"{\"inputs\": [{\"name\": \"z\"",
                                  b"{\"inputs\": [{\"name\": \"z\", \"shape\": [1,100,1,1], \"datatype\": "
                                  b"\"FP32\", \"data\": [\"not a number\"]}]}",
                                  b"{\"inputs\": [{\"name\": \"z\", \"shape\": [1,100,1,1], \"datatype\": "
                                  b"\"FP32\", \"data\": [" + b",".join([b"0.5"] * 50) + b"]}]}"],  # 50 of 100
                         ids=["empty", "binary", "truncated_json", "not_a_number", "too_few_values"])
def test_garbage_http_body_gets_error(server, body):
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v2/models/ebgan_fashion/infer",
                                 data=body, method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert 400 <= e.value.code < 600  # Triton answers 400 or 500 (its parser's errors are "internal")
    serves(server)


def test_garbage_grpc_bytes_get_error(server):
    """Random bytes on the gRPC port (not even HTTP/2): the connection is dropped, the server serves on."""
    with socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10) as s:
        s.sendall(os.urandom(4096))
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except (ConnectionResetError, socket.timeout):
            pass
    serves(server)


def test_soak_then_clean_stop(server):
    """SOAK_SECONDS at a fixed offered load (4 clients, each one request every 50 ms: ~80 requests/s,
    both models, both protocols, batches 1-4): zero failed or wrong responses, server RSS flat. Then
    SIGTERM stops the server and its stubs with exit status 0."""
    rng = np.random.default_rng(11)
    inputs = {"ebgan_fashion": [rng.standard_normal((b, 100, 1, 1)).astype(np.float32) for b in (1, 2, 3, 4)],
              "lenet5_fashion": [rng.uniform(-1, 1, (b, 1, 28, 28)).astype(np.float32) for b in (1, 2, 3, 4)]}
    want = {m: [cli_outputs(server.tmp, EBGAN if m == "ebgan_fashion" else LENET, x, f"soak_{m}_{k}")
                for k, x in enumerate(xs)] for m, xs in inputs.items()}
    counts = {"ok": 0, "failed": 0, "wrong": 0}
    failures = []
    lock = threading.Lock()
    stop = time.time() + SOAK_SECONDS

    def client(k):
        http = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
        grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
        n = 0
        next_t = time.time()
        while time.time() < stop:
            m = "ebgan_fashion" if (n + k) % 2 == 0 else "lenet5_fashion"
            j = (n * 3 + k) % 4
            try:
                f, c = (http_infer, http) if n % 2 == 0 else (grpc_infer, grpc)
                y = f(c, m, inputs[m][j], out_name(m))
                key = "ok" if close(y, want[m][j]) else "wrong"
            except Exception as e:  # noqa: BLE001
                key = "failed"
                failures.append(repr(e)[:200])
            with lock:
                counts[key] += 1
            n += 1
            next_t += 0.05
            time.sleep(max(0.0, next_t - time.time()))
        http.close()
        grpc.close()

    rss = [server.rss()]
    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        rss.append(server.rss())
    for t in threads:
        t.join()
    print(f"soak {SOAK_SECONDS:.0f} s: {counts}, RSS MiB first/peak/last "
          f"{rss[1] / 2**20:.1f}/{max(rss) / 2**20:.1f}/{rss[-1] / 2**20:.1f}")
    assert counts["failed"] == 0 and counts["wrong"] == 0, (counts, failures[:3])
    assert counts["ok"] >= SOAK_SECONDS * 40  # at least half the offered load was served
    # Flat: after the first second's warm-up (buffers reach their size), under 5% + 16 MiB of growth.
    base = rss[1] if len(rss) > 2 else rss[0]
    assert rss[-1] <= base * 1.05 + 16 * 2**20, [r // 2**20 for r in rss]
    code, left = server.stop()
    assert code == 0, f"tritonserver exit status {code}:\n{server.tail()}"
    assert not left, f"Python backend stubs left running: {left}"
