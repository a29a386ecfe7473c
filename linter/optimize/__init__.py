"""``gpulint optimize``: rewrite a single-stage GPU Dockerfile into a builder and a slim shipped stage.

The input is a single-stage Dockerfile whose stage is built on a CUDA devel image (or installs
compilers and -dev packages). The output has

- a builder stage on the original image, where compilation and wheel builds happen: every
  pip/uv install goes into a virtualenv under ``/opt/venv`` (with a cache mount for the
  download cache), ``nvcc -o FILE`` builds its file, ``git clone`` fetches sources;
- a shipped stage on the runtime image of the same CUDA version and OS (the ``-base`` image
  when pip's CUDA wheels bring their own CUDA libraries and nothing else needs the image's),
  or the original image when it is not a devel image: system packages without build tools,
  ``--no-install-recommends`` and the apt lists removed in the same RUN, then ``COPY
  --from=builder`` of the virtualenv and the compiled files only;
- model weights that were downloaded or copied into the image left out, with ``HF_HOME`` on a
  ``VOLUME``;
- a header comment that says what changed and the expected saving (from the sourced flavour
  table in ``rules/data/base_images.yaml``).

Everything else is refused with the reason (:class:`Refused`), never guessed at: shell steps
gpulint does not know (their outputs cannot be named), compilation at run time, ONBUILD,
multi-stage input, own virtualenvs, conda, editable installs, installs to other prefixes.

The planning steps, in the order they run:

- :mod:`.chain` cuts a RUN into the links of its ``&&`` chain;
- :mod:`.classify` names what each link does (apt, pip, compile, clone, set-up...) or refuses it;
- :mod:`.plan` checks the whole file (one stage, resolvable base, nothing compiled at run time),
  picks the shipped base (:mod:`.shipped`) and writes the header;
- :mod:`.emit` writes the builder and the shipped stage, instruction by instruction, with
  :mod:`.packages` filtering build tools out of the shipped stage's apt installs;
- :mod:`.command` is the CLI (imported only by ``gpulint optimize``): the split, else the in-place slimming (``gpulint.slimming``), else
  the plan.
"""

from __future__ import annotations

from .model import VENV, Optimized, Refused
from .plan import optimize

__all__ = ["VENV", "Optimized", "Refused", "optimize"]
