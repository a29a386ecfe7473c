# gpulint as a container image, for CI systems that run linters as images:
#   docker run --rm -v "$PWD:/src" -w /src gpulint Dockerfile
FROM python:3.12.7-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY linter ./linter
COPY rules ./rules
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12.7-slim-bookworm
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir /wheels/*.whl
USER nobody
WORKDIR /src
ENTRYPOINT ["gpulint"]
CMD ["--help"]
