"""Where the uncompressed image walk's time goes, set beside `tar -tf` of the same layers.

`make bench` compares the whole `gpulint image` command with `tar -tf`; this splits the
command into the stages it adds one after another, each run as its own cold process,
round-robin with the others (medians of wall and CPU time), on the image `make bench`
generates (a docker-archive of 4 layers, 200,000 files, 2 GB):

    tar -tf                     GNU tar listing the four layer tars, one after another
    header loop                 gpulint.image.tarscan over the four layer tars: names, sizes, types
    + evidence                  analysis.scan_layer over that loop: the per-file CUDA, driver,
                                cache and weight evidence and the per-layer totals
    + archive, stacking         open the docker-archive and analysis.analyse(jobs=1): every layer
                                scanned, then stacked (whiteouts, what each layer hides)
    gpulint image -j 1          the command: the CLI, the checks on the analysis, the JSON report
    gpulint image               the same with its default, one process a layer up to the CPUs

Each stage's cost is the difference with the row above it. Usage (from a regular install,
as `make bench` makes one): python benchmarks/walk_profile.py [--runs 7] [--image-mb 2000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import BIN, compare, make_docker_archive, make_layers, run_header, tar_list, write_results

HEADER_LOOP = """
import sys
from gpulint.image.tarscan import iter_members
from gpulint.image.analysis import wants_content
for path in sys.argv[1:]:
    with open(path, "rb") as stream:
        for _ in iter_members(stream, read_data=wants_content):
            pass
"""

WITH_EVIDENCE = """
import sys
from gpulint.image.tarscan import iter_members
from gpulint.image.analysis import scan_layer, wants_content
from gpulint.image.weights import WeightRules
extensions = WeightRules.load().extensions
for index, path in enumerate(sys.argv[1:]):
    with open(path, "rb") as stream:
        scan_layer(iter_members(stream, read_data=wants_content), index, [], extensions, 1 << 20)
"""

STACKED = """
import sys
from gpulint.image.analysis import analyse
from gpulint.image.sources import open_image
with open_image(sys.argv[1]) as image:
    analyse(image, jobs=1, trees=False)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--image-mb", type=int, default=2000)
    parser.add_argument("--image-files", type=int, default=200_000)
    args = parser.parse_args()
    gpulint = shutil.which("gpulint", path=str(BIN)) or "gpulint"
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        layers = make_layers(work, args.image_mb, args.image_files)
        archive = work / "image.tar"
        make_docker_archive(archive, layers)
        names = [str(path) for path in layers]
        command = [gpulint, "image", "--format", "json", "--fail-on", "never"]
        case = compare(
            f"image walk by stage, docker-archive, {args.image_mb / 1000:g} GB / "
            f"{args.image_files:,} files in 4 layers",
            {
                # compare() takes the first row's label "gpulint" as the base of the ratios
                "gpulint": [*command, f"docker-archive:{archive}"],
                "gpulint -j 1": [*command, "-j", "1", f"docker-archive:{archive}"],
                "+ archive, stacking": [python, "-c", STACKED, f"docker-archive:{archive}"],
                "+ evidence": [python, "-c", WITH_EVIDENCE, *names],
                "header loop": [python, "-c", HEADER_LOOP, *names],
                "tar -tf": tar_list(layers, gz=False),
            },
            args.runs,
        )
    out = write_results("walk-profile", {**run_header(gpulint), "results": [case]})
    print(case["case"])
    for label, numbers in case["tools"].items():  # type: ignore[attr-defined]
        print(f"  {label:<22} {numbers['median_s']:.3f} s wall  {numbers['median_cpu_s']:.3f} s CPU")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
