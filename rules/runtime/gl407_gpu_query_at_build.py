"""GL407 gpu-query-at-build: A RUN step probes the GPU, which docker build cannot see."""

from __future__ import annotations

from collections.abc import Iterator

from gpulint.context import LintContext
from gpulint.facts.cuda import guarded
from gpulint.finding import Finding, FixSafety, Severity
from gpulint.lazyre import lazy_re
from gpulint.rule import Rule, register
from gpulint.shell import Command

_GPU_PROBE_RE = lazy_re(
    r"torch\.cuda\.(is_available|device_count|get_device_name|get_device_capability|current_device)\s*\("
    r"|jax\.devices\(\s*['\"]gpu['\"]\s*\)|jax\.local_devices\(\s*backend\s*=\s*['\"]gpu['\"]"
    r"|tf\.config\.(experimental\.)?list_physical_devices\(\s*['\"]GPU['\"]\s*\)|tf\.test\.is_gpu_available\("
    r"|cupy\.cuda\.runtime\.getDeviceCount\(|numba\.cuda\.detect\("
)
_PYTHON_RE = lazy_re(r"^(python|pypy)[\d.]*$|^ipython\d?$")
_RUNNERS = frozenset({"conda", "mamba", "micromamba", "uv", "poetry", "pipenv", "pdm", "hatch", "rye"})


def _python_code(cmd: Command) -> list[str]:
    """The Python source a command runs inline: ``python -c CODE``, ``python - <<EOF``, ``conda run python -c``."""
    argv = cmd.arg_values
    name = cmd.name
    if name in _RUNNERS:
        for i, value in enumerate(argv):
            if _PYTHON_RE.match(value.rsplit("/", 1)[-1]):
                argv = argv[i + 1 :]
                name = "python"
                break
        else:
            return []
    if "py" not in name or not _PYTHON_RE.match(name):
        return []
    code: list[str] = []
    for i, value in enumerate(argv):
        if value == "-c" and i + 1 < len(argv):
            code.append(argv[i + 1])
            break
        if value.startswith("-c") and len(value) > 2:
            code.append(value[2:])
            break
    if cmd.stdin and not any(v.endswith(".py") for v in argv):
        code.append(cmd.stdin)
    return code


def _probes_gpu(cmd: Command) -> str | None:
    """The GPU probe a command runs, if any (nvidia-smi, or a probe in inline Python)."""
    if cmd.name == "nvidia-smi":
        return "nvidia-smi"
    if cmd.name == "vllm" and cmd.arg_values[:1] == ["serve"] and "--help" not in cmd.arg_values:
        return "vllm serve"  # the server initialises CUDA on start: no GPU at build, it exits
    for text in _python_code(cmd):
        match = _GPU_PROBE_RE.search(text)
        if match:
            probe = match.group(0).strip()
            return probe[:-1].rstrip() + "()" if probe.endswith("(") else probe
    return None


@register
class GpuQueryAtBuild(Rule):
    code = "GL407"
    slug = "gpu-query-at-build"
    severity = Severity.ERROR
    fix_safety = FixSafety.SUGGEST
    summary = "A RUN step probes the GPU, which docker build cannot see"
    what = """
        Finds `RUN` steps that query the GPU: `nvidia-smi`, `vllm serve` (the
        server initialises CUDA),
        `torch.cuda.is_available()`, `torch.cuda.device_count()`,
        `jax.devices('gpu')`, `tf.config.list_physical_devices('GPU')` run by
        Python (`python -c`, `python - <<EOF`, `conda run python`).
        `nvcc --version`, probes in `CMD`, `ENTRYPOINT` or `HEALTHCHECK` (run
        time), scripts merely written to a file, diagnostics whose failure
        decides nothing (`probe || echo ...`, `if nvidia-smi; then`, piped), and
        BuildKit's `RUN --device=nvidia.com/gpu=...` are fine.
    """
    why = """
        `docker build` runs without GPUs: the step fails ("nvidia-smi: not
        found", "NVIDIA-SMI has failed"), or it succeeds and bakes a wrong
        answer (no GPU, 0 devices) into the image - a build-time check that
        checks nothing.
    """
    example = """
        RUN python -c "import torch; assert torch.cuda.is_available()"
    """
    instead = """
        Check at run time, where the GPU is visible:

        HEALTHCHECK CMD python -c "import torch; assert torch.cuda.is_available()"
    """

    checks_image_history = True  # `gpulint image` runs check() on the history commands too

    def check(self, ctx: LintContext) -> Iterator[Finding]:
        for stage in ctx.stages:
            for instr in stage.instructions:
                if instr.keyword != "RUN" or instr.flag("device"):
                    continue  # RUN --device=nvidia.com/gpu=... (BuildKit CDI) does see a GPU
                for cmd in ctx.commands(instr):
                    probe = _probes_gpu(cmd)
                    if probe and not instr.heredocs and guarded(instr.args, cmd.text):
                        continue  # `probe || echo ...`, `if probe; then`: a diagnostic whose failure decides nothing
                    if probe:
                        effect = (
                            "nvidia-smi fails (the NVIDIA runtime mounts it and the driver only when a container "
                            "runs)"
                            if probe == "nvidia-smi"
                            else "it returns False/0 (or raises) and whatever the step does with that is baked in"
                        )
                        yield self.finding(
                            ctx,
                            f"this RUN calls {probe} during `docker build`, which runs without a GPU: {effect}; "
                            "check the GPU at run time (CMD/ENTRYPOINT/HEALTHCHECK) instead",
                            line=cmd.line,
                            column=cmd.argv[0].column,
                        )
