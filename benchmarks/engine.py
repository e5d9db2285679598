"""Diffusion engine vs an autoregressive baseline of the same weights, side by side.

For each model size, on one random model (``Engine.random(config, seed=0)``):

* a 256-token answer at 16 and 32 steps (prompt cache off, approximate, and exact on
  the same weights with the prompt isolated from the reply; exact again with the
  delayed canvas cache) against greedy autoregressive decoding of the same transformer
  run causally with a KV cache;
* time against answer length at 16 steps, and against steps at 256 tokens;
* forward passes per answer, counted by a hook on the model.

``--batching`` measures batched and continuous denoising instead (16 steps): tokens/s of
``Engine.answer_batch`` at each ``--batches`` size against batch 1, then a stream of
``--arrivals`` conversations arriving at a fixed interval (half a lone answer's time: twice
what one-at-a-time can serve) through ``engine.Scheduler`` with ``max_batch`` 16 against
``max_batch`` 1 (one at a time, the same queue): p50/p95 latency per answer from its
arrival, and the wall time of the whole stream.

``--compile-vs-eager`` times the compiled step against eager on the same weights instead
(batch 1, 256-token answers, 16 and 32 steps, prompt cache off: the plain schedule, so
no pass waits for the device): tokens/s and ms per step of each, and a roofline for one
step computed here: the weights read once at a bandwidth measured by a large device
copy, or the step's matrix FLOPs at a matmul rate measured in the run's dtype, whichever
takes longer. ``--compile on|off`` sets the other modes' engines (default: the engine's
own choice, compiled on CUDA).

All configurations of one size are timed round-robin (one run of each, then again), so
load on a shared machine hits them alike. Absolute times only compare within one run;
the ratios are the result. Run from the repository root: ``python benchmarks/engine.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and this file is also
# named engine: drop the folder so that ``import engine`` finds the package.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import torch  # noqa: E402
from quicksilver.engine import Engine, ModelConfig, Scheduler, Tokenizer  # noqa: E402
from quicksilver.engine.machine import describe  # noqa: E402
from quicksilver.engine.model import KVCache, Transformer  # noqa: E402
from quicksilver.engine.sampler import CanvasCache  # noqa: E402

SIZES: dict[str, Callable[[], ModelConfig]] = {
    "tiny": lambda: ModelConfig(vocab_size=512, d_model=128, n_layers=4, n_heads=4),  # 1M
    "small": lambda: ModelConfig(vocab_size=512, d_model=320, n_layers=8, n_heads=5),  # 10M
    "medium": lambda: ModelConfig(vocab_size=512, d_model=512, n_layers=8, n_heads=8),  # 26M
    "base": lambda: ModelConfig(vocab_size=512, d_model=640, n_layers=10, n_heads=10),  # 50M
    "large": lambda: ModelConfig(vocab_size=512, d_model=1024, n_layers=12, n_heads=16),  # 153M
    "llada-8b": ModelConfig.llada_8b,  # 8.0B, vocabulary 126,464
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
PROMPT = [
    {"role": "system", "content": "You are Quicksilver, a voice assistant. Answer briefly."},
    {"role": "user", "content": "What is 17 times 3, and how did you work it out?"},
]
ANSWER_TOKENS = 256
MAIN_STEPS = (16, 32)
CACHES = ("off", "approximate", "exact")


@dataclass(frozen=True)
class Case:
    """One thing to time: the baseline (``steps`` None) or a diffusion answer."""

    cache: str  # "kv" for the baseline; "off", "approximate" or "exact" for diffusion
    steps: int | None
    tokens: int
    canvas: CanvasCache = "off"
    compiled: bool = False

    @property
    def label(self) -> str:
        if self.steps is None:
            return "autoregressive, KV cache"
        canvas = ", canvas cache delayed" if self.canvas == "delayed" else ""
        compiled = ", compiled" if self.compiled else ""
        return f"diffusion {self.steps} steps, prompt cache {self.cache}{canvas}{compiled}"


@dataclass
class Measurement:
    """Median wall time of one call, forward passes per call, peak GPU memory."""

    seconds: float
    passes: int
    peak_mib: float | None


@dataclass
class Row:
    """A measured case; ``speedup`` is AR time / this time at the same answer length."""

    size: str
    case: Case
    seconds: float
    passes: int
    peak_mib: float | None
    speedup: float | None

    @property
    def tokens_per_s(self) -> float:
        return self.case.tokens / self.seconds

    @property
    def ms_per_pass(self) -> float:
        return 1000 * self.seconds / self.passes


def measure(
    fns: dict[Case, Callable[[], object]], model: Transformer, repeats: int, warmup: int, name: str
) -> dict[Case, Measurement]:
    """Time each function ``repeats`` times round-robin after ``warmup`` untimed rounds.

    Returns the median time per function, forward passes per call (counted by a hook on
    ``model``) and, on CUDA, peak allocated memory; CUDA times come from events.
    """
    cuda = next(model.parameters()).device.type == "cuda"
    passes = 0

    def count(*_) -> None:
        nonlocal passes
        passes += 1

    times: dict[Case, list[float]] = {case: [] for case in fns}
    calls = dict.fromkeys(fns, 0)
    peaks = dict.fromkeys(fns, 0)
    # Left out of torch.compile: traced, the hook would recompile at every count.
    handle = model.register_forward_hook(torch.compiler.disable(count))
    try:
        for round_ in range(warmup + repeats):
            for case, fn in fns.items():
                if cuda:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
                    start.record()
                passes, began = 0, time.perf_counter()
                fn()
                if cuda:
                    end.record()
                    end.synchronize()
                    seconds = start.elapsed_time(end) / 1000
                    peaks[case] = max(peaks[case], torch.cuda.max_memory_allocated())
                else:
                    seconds = time.perf_counter() - began
                calls[case] = passes
                if round_ >= warmup:
                    times[case].append(seconds)
                    print(
                        f"  [{name}] {case.label}, {case.tokens} tokens: {seconds:.3f} s",
                        file=sys.stderr,
                    )
    finally:
        handle.remove()
    return {
        case: Measurement(
            statistics.median(times[case]), calls[case], peaks[case] / 2**20 if cuda else None
        )
        for case in fns
    }


def autoregressive(model: Transformer, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding with the same weights run causally and a KV cache.

    One pass over the prompt, then one single-token pass per further token: ``new_tokens``
    passes in all (the last token's own pass would only extend the cache). Per pass:
    a forward and an argmax; the tokens never leave the device.
    """
    param = next(model.parameters())
    length = prompt.numel()
    sequence = torch.zeros(1, length + new_tokens, dtype=torch.long, device=param.device)
    sequence[0, :length] = prompt
    cache = KVCache(model.config, 1, length + new_tokens, param.device, param.dtype)
    with torch.inference_mode():
        logits = model(sequence[:, :length], causal=True, cache=cache)
        for position in range(length, length + new_tokens - 1):
            sequence[0, position] = logits[0, -1].argmax()
            logits = model(
                sequence[:, position : position + 1], start=position, causal=True, cache=cache
            )
        sequence[0, -1] = logits[0, -1].argmax()
    return sequence[0, length:]


@contextmanager
def prompt_isolated(model: Transformer) -> Iterator[None]:
    """The same weights with ``prompt_sees_reply=False``, so the exact prompt cache applies."""
    config = model.config
    model.config = dataclasses.replace(config, prompt_sees_reply=False)
    try:
        yield
    finally:
        model.config = config


def main_cases() -> list[Case]:
    """The baseline and diffusion at each main step count and prompt cache, and with the
    delayed canvas cache beside the exact prompt cache."""
    return [Case("kv", None, ANSWER_TOKENS)] + [
        case
        for steps in MAIN_STEPS
        for case in (
            *(Case(cache, steps, ANSWER_TOKENS) for cache in CACHES),
            Case("exact", steps, ANSWER_TOKENS, canvas="delayed"),
        )
    ]


def cases(args: argparse.Namespace, sweep: bool) -> list[Case]:
    """The main comparison, plus the length and steps sweeps when ``sweep``."""
    wanted = main_cases()
    if sweep:
        for tokens in args.lengths:
            wanted += [Case("kv", None, tokens), Case("off", 16, tokens)]
        wanted += [Case("off", steps, ANSWER_TOKENS) for steps in args.steps]
    return list(dict.fromkeys(wanted))


def bench_size(name: str, engine: Engine, args: argparse.Namespace, sweep: bool) -> list[Row]:
    """Time every case of one model size; speed-ups against the baseline of equal length."""
    model = engine.model
    prompt = torch.tensor(engine.tokenizer.prompt_ids(PROMPT), device=engine.device)

    def runner(case: Case) -> Callable[[], object]:
        if case.steps is None:
            return lambda: autoregressive(model, prompt, case.tokens)

        def answer() -> object:
            options = {
                "steps": case.steps,
                "max_new_tokens": case.tokens,
                "canvas_cache": case.canvas,
            }
            if case.cache != "exact":
                return engine.answer(PROMPT, prompt_cache=case.cache, **options)
            with prompt_isolated(model):
                return engine.answer(PROMPT, prompt_cache="exact", **options)

        return answer

    fns = {case: runner(case) for case in cases(args, sweep)}
    results = measure(fns, model, args.repeats, args.warmup, name)
    rows = []
    for case, m in results.items():
        baseline = results.get(Case("kv", None, case.tokens))
        speedup = baseline.seconds / m.seconds if baseline else None
        rows.append(Row(name, case, m.seconds, m.passes, m.peak_mib, speedup))
    return rows


def report(name: str, params: int, rows: list[Row], gpu: bool) -> str:
    """Markdown tables of one size's rows."""
    by_case = {row.case: row for row in rows}
    mem_head, mem_rule = (" peak MiB |", "---:|") if gpu else ("", "")
    lines = [
        f"### {name} ({params / 1e6:,.1f}M parameters)",
        "",
        f"| {ANSWER_TOKENS}-token answer | passes | time s | tokens/s | ms/pass |{mem_head} "
        "AR time / this |",
        f"|---|---:|---:|---:|---:|{mem_rule}---:|",
    ]
    for case in main_cases():
        r = by_case[case]
        mem = f" {r.peak_mib:,.0f} |" if gpu else ""
        lines.append(
            f"| {case.label} | {r.passes} | {r.seconds:.3f} | {r.tokens_per_s:,.0f} | "
            f"{r.ms_per_pass:.2f} |{mem} {r.speedup:.2f}× |"
        )
    lengths = sorted({c.tokens for c in by_case if c.steps is None})
    if len(lengths) > 1:
        ar0, d0 = by_case[Case("kv", None, lengths[0])], by_case[Case("off", 16, lengths[0])]
        lines += [
            "",
            "Answer length at 16 steps, prompt cache off (× = time relative to the first row):",
            "",
            "| tokens | diffusion s | × | AR s | × | AR / diffusion |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for tokens in lengths:
            ar, d = by_case[Case("kv", None, tokens)], by_case[Case("off", 16, tokens)]
            lines.append(
                f"| {tokens} | {d.seconds:.3f} | {d.seconds / d0.seconds:.2f} | "
                f"{ar.seconds:.3f} | {ar.seconds / ar0.seconds:.2f} | {d.speedup:.2f}× |"
            )
    steps = sorted(
        (r for r in rows if r.case.cache == "off" and r.case.tokens == ANSWER_TOKENS),
        key=lambda r: r.case.steps,
    )
    if len(steps) > len(MAIN_STEPS):
        lines += [
            "",
            f"Steps at {ANSWER_TOKENS} tokens, prompt cache off:",
            "",
            "| steps | passes | diffusion s | × | ms/pass | AR / diffusion |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for r in steps:
            lines.append(
                f"| {r.case.steps} | {r.passes} | {r.seconds:.3f} | "
                f"{r.seconds / steps[0].seconds:.2f} | {r.ms_per_pass:.2f} | {r.speedup:.2f}× |"
            )
    return "\n".join(lines)


@dataclass(frozen=True)
class Roofline:
    """The fastest a pass could run: weights read once, matrix FLOPs at the peak rate."""

    bandwidth: float  # bytes/s, measured by a large device-to-device copy
    matmul: float  # FLOP/s, measured by a square matmul in the model's dtype
    weight_bytes: float  # read once per pass (the embedding table is only gathered)
    flops: float  # matrix FLOPs of one pass

    @property
    def seconds(self) -> float:
        return max(self.weight_bytes / self.bandwidth, self.flops / self.matmul)


def measure_roofline(engine: Engine, positions: int, canvas: int) -> Roofline:
    """Measure this device's copy bandwidth and matmul rate, then bound one pass over
    ``positions`` (prompt and canvas) whose output layer runs on ``canvas`` of them."""
    param = next(engine.model.parameters())
    device, dtype = param.device, param.dtype
    cuda = device.type == "cuda"
    config = engine.model.config
    head = config.vocab_size * config.d_model
    body = config.parameter_count() - head * (1 if config.tie_embeddings else 2)
    weight_bytes = (body + head) * param.element_size()
    flops = 2 * body * positions + 2 * head * canvas

    def best(fn: Callable[[], object], repeats: int = 5) -> float:
        fn()
        times = []
        for _ in range(repeats):
            synchronize(engine)
            began = time.perf_counter()
            fn()
            synchronize(engine)
            times.append(time.perf_counter() - began)
        return min(times)

    size = 2**32 if cuda else 2**28  # bytes: far larger than any cache
    source = torch.empty(size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    bandwidth = 2 * size / best(lambda: target.copy_(source))  # each byte read and written
    n = 8192 if cuda else 1024
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    matmul = 2 * n**3 / best(lambda: a @ b)
    return Roofline(bandwidth, matmul, weight_bytes, flops)


def bench_compile(name: str, engine: Engine, args: argparse.Namespace) -> tuple[str, list[dict]]:
    """Eager against compiled on the same weights, batch 1, with the roofline."""
    eager = Engine(engine.model, engine.tokenizer, engine.sampler, compile=False)
    compiled = Engine(engine.model, engine.tokenizer, engine.sampler, compile=True)
    options = {"max_new_tokens": ANSWER_TOKENS, "prompt_cache": "off"}
    began = time.perf_counter()
    first = compiled.answer(PROMPT, steps=MAIN_STEPS[0], **options)
    compile_s = time.perf_counter() - began
    same = first.tokens == eager.answer(PROMPT, steps=MAIN_STEPS[0], **options).tokens
    cases = {
        Case("off", steps, ANSWER_TOKENS, compiled=flag): (
            lambda e=(compiled if flag else eager), s=steps: e.answer(PROMPT, steps=s, **options)
        )
        for steps in MAIN_STEPS
        for flag in (False, True)
    }
    results = measure(cases, engine.model, args.repeats, args.warmup, name)
    prompt = len(engine.tokenizer.prompt_ids(PROMPT))
    roof = measure_roofline(engine, prompt + ANSWER_TOKENS, ANSWER_TOKENS)
    lines = [
        f"{name}: eager vs compiled, batch 1, {ANSWER_TOKENS}-token answer, prompt cache off "
        f"(first compiled answer, compiling included: {compile_s:.1f} s; greedy tokens "
        f"{'equal' if same else 'DIFFER'} to eager)",
        "",
        f"Roofline per step: {roof.weight_bytes / 1e9:.3g} GB of weights at a measured "
        f"{roof.bandwidth / 1e9:,.0f} GB/s = {1000 * roof.weight_bytes / roof.bandwidth:.3g} ms; "
        f"{roof.flops / 1e12:.3g} TFLOP at a measured {roof.matmul / 1e12:,.3g} TFLOP/s = "
        f"{1000 * roof.flops / roof.matmul:.3g} ms; the larger: {1000 * roof.seconds:.3g} ms",
        "",
        "| steps | eager tokens/s | eager ms/step | compiled tokens/s | compiled ms/step | "
        "eager / compiled | compiled / roofline |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for steps in MAIN_STEPS:
        e = results[Case("off", steps, ANSWER_TOKENS)]
        c = results[Case("off", steps, ANSWER_TOKENS, compiled=True)]
        step_e, step_c = e.seconds / e.passes, c.seconds / c.passes
        lines.append(
            f"| {steps} | {ANSWER_TOKENS / e.seconds:,.0f} | {1000 * step_e:.2f} | "
            f"{ANSWER_TOKENS / c.seconds:,.0f} | {1000 * step_c:.2f} | "
            f"{e.seconds / c.seconds:.2f}× | {step_c / roof.seconds:.2f}× |"
        )
        for flag, m in ((False, e), (True, c)):
            rows.append({"size": name, "steps": steps, "compiled": flag, "seconds": m.seconds,
                         "passes": m.passes, "tokens_per_s": ANSWER_TOKENS / m.seconds,
                         "roofline_ms": 1000 * roof.seconds})  # fmt: skip
    rows.append({"size": name, "compile_s": compile_s, "same_tokens": same,
                 **dataclasses.asdict(roof)})  # fmt: skip
    return "\n".join(lines), rows


def conversations(count: int) -> list[list[dict[str, str]]]:
    """``count`` different conversations of different prompt lengths."""
    return [
        [PROMPT[0], {"role": "user", "content": f"What is {i + 2} times 3?" + " Why?" * (i % 5)}]
        for i in range(count)
    ]


def synchronize(engine: Engine) -> None:
    if engine.device.type == "cuda":
        torch.cuda.synchronize()


def bench_batching(name: str, engine: Engine, args: argparse.Namespace) -> tuple[str, list[dict]]:
    """Batch throughput against batch 1, and a stream of arrivals with and without
    continuous batching (see the module doc)."""
    options = {"steps": 16, "max_new_tokens": args.tokens}
    rows, times = [], {}
    for size in (*args.batches, *args.batches):  # each size twice: warm-up, then timed
        batch = conversations(size)
        synchronize(engine)
        began = time.perf_counter()
        answers = engine.answer_batch(batch, **options)
        synchronize(engine)
        times[size] = time.perf_counter() - began
        assert all(a.forward_passes == 16 for a in answers)
    base = args.tokens / times[args.batches[0]]
    lines = [
        f"{name}: batched denoising, 16 steps, {args.tokens}-token canvases",
        "",
        f"| batch | s per batch | tokens/s | × batch {args.batches[0]} |",
        "|---:|---:|---:|---:|",
    ]
    for size in args.batches:
        rate = size * args.tokens / times[size]
        lines.append(f"| {size} | {times[size]:.3f} | {rate:,.0f} | {rate / base:.2f} |")
        rows.append({"size": name, "batch": size, "seconds": times[size], "tokens_per_s": rate})
    interval = times[1 if 1 in times else args.batches[0]] / 2
    lines += [
        "",
        f"{name}: {args.arrivals} conversations arriving every {interval * 1000:.0f} ms "
        "(half a lone answer's time)",
        "",
        "| scheduler | p50 s | p95 s | stream wall s |",
        "|---|---:|---:|---:|",
    ]
    latencies = {}
    for max_batch in (1, 16):
        latency, wall = stream_of_arrivals(engine, max_batch, interval, args.arrivals, options)
        latencies[max_batch] = latency
        p50, p95 = percentile(latency, 50), percentile(latency, 95)
        label = "one at a time (max_batch 1)" if max_batch == 1 else "continuous, max_batch 16"
        lines.append(f"| {label} | {p50:.3f} | {p95:.3f} | {wall:.2f} |")
        rows.append({"size": name, "max_batch": max_batch, "p50_s": p50, "p95_s": p95,
                     "wall_s": wall, "interval_s": interval})  # fmt: skip
    ratio = percentile(latencies[1], 50) / percentile(latencies[16], 50)
    lines.append(f"\np50 one at a time / continuous: {ratio:.2f}")
    return "\n".join(lines), rows


def stream_of_arrivals(
    engine: Engine, max_batch: int, interval: float, count: int, options: dict
) -> tuple[list[float], float]:
    """Submit ``count`` conversations ``interval`` seconds apart; per-answer latency from
    its submission (Answer.latency_s) and the wall time until the last answer."""
    batch = conversations(count)
    with Scheduler(engine, max_batch=max_batch) as scheduler:
        handles = []
        began = time.perf_counter()

        def arrive() -> None:
            for i, conversation in enumerate(batch):
                time.sleep(max(0.0, began + i * interval - time.perf_counter()))
                handles.append(scheduler.submit(conversation, drafts=False, **options))

        arrivals = threading.Thread(target=arrive)
        arrivals.start()
        arrivals.join()
        latency = [handle.result().latency_s for handle in handles]
        wall = time.perf_counter() - began
    return latency, wall


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", help=f"comma-separated, of: {', '.join(SIZES)} (default tiny,small,medium)"
    )
    parser.add_argument(
        "--sweep-sizes", help="sizes that also get the length and steps sweeps (default: first)"
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", choices=DTYPES, help="default: float32 on cpu, bf16 on cuda")
    parser.add_argument("--repeats", type=int, help="timed rounds, median reported (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--lengths", type=_ints, help="swept at 16 steps (64,128,256,512)")
    parser.add_argument("--steps", type=_ints, help=f"swept at {ANSWER_TOKENS} tokens (8,16,32,64)")
    parser.add_argument(
        "--quick", action="store_true", help="tiny model, one round, shorter sweeps: < 1 min"
    )
    parser.add_argument("--json", metavar="OUT", help="also write every row to this JSON file")
    parser.add_argument(
        "--batching", action="store_true", help="batched and continuous denoising instead"
    )
    parser.add_argument("--batches", type=_ints, default=(1, 4, 16), help="batch sizes (1,4,16)")
    parser.add_argument("--arrivals", type=int, default=16, help="conversations in the stream")
    parser.add_argument("--tokens", type=int, default=128, help="--batching canvas length (128)")
    parser.add_argument(
        "--compile-vs-eager", action="store_true", help="the compiled step against eager instead"
    )
    parser.add_argument(
        "--compile", choices=("auto", "on", "off"), default="auto",
        help="compile the other modes' engines (auto: on CUDA only)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.sizes = (args.sizes or ("tiny" if args.quick else "tiny,small,medium")).split(",")
    args.sweep_sizes = args.sizes[:1] if args.sweep_sizes is None else args.sweep_sizes.split(",")
    unknown = [s for s in args.sizes + args.sweep_sizes if s not in SIZES and s != "none"]
    if unknown:
        parser.error(f"unknown sizes {unknown}; choose from {', '.join(SIZES)}")
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.lengths = args.lengths or ((64, 128, 256) if args.quick else (64, 128, 256, 512))
    args.steps = args.steps or ((8, 16, 32) if args.quick else (8, 16, 32, 64))
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no CUDA GPU")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    gpu = args.device == "cuda"
    dtype = DTYPES[args.dtype] if args.dtype else None
    all_rows, sections = [], []
    for name in args.sizes:
        config = SIZES[name]()
        began = time.perf_counter()
        compile = {"auto": None, "on": True, "off": False}[args.compile]
        engine = Engine.random(config, seed=0, device=args.device, dtype=dtype, compile=compile)
        if gpu:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        dtype = next(engine.model.parameters()).dtype
        print(
            f"[{name}] {config.parameter_count() / 1e6:,.1f}M parameters, {dtype}, "
            f"built in {time.perf_counter() - began:.1f} s",
            file=sys.stderr,
        )
        if args.compile_vs_eager:
            section, records = bench_compile(name, engine, args)
            sections.append(section)
            all_rows += records
        elif args.batching:
            section, records = bench_batching(name, engine, args)
            sections.append(section)
            all_rows += records
        else:
            rows = bench_size(name, engine, args, sweep=name in args.sweep_sizes)
            all_rows += rows
            sections.append(report(name, config.parameter_count(), rows, gpu))
        del engine
        if gpu:
            torch.cuda.empty_cache()
    where = describe("cuda" if gpu else "cpu")
    header = (
        f"Engine benchmark: {args.device} ({where}), {str(dtype).removeprefix('torch.')}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s); prompt "
        f"{len(Tokenizer.byte_level().prompt_ids(PROMPT))} tokens; median of {args.repeats} "
        f"round(s) after {args.warmup} warm-up round(s)"
    )
    print(header, "", "\n\n".join(sections), sep="\n", flush=True)
    if args.json:
        records = [
            r
            if isinstance(r, dict)
            else dataclasses.asdict(r)
            | {"tokens_per_s": r.tokens_per_s, "ms_per_pass": r.ms_per_pass}
            for r in all_rows
        ]
        Path(args.json).write_text(json.dumps({"header": header, "rows": records}, indent=1))


if __name__ == "__main__":
    main()
