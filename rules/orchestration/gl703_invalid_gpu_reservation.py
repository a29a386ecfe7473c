"""GL703 invalid-gpu-reservation: A compose GPU device request that Docker refuses or cannot satisfy."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from gpulint.finding import Finding, Severity
from gpulint.manifests import (
    ManifestContext,
    ManifestRule,
    Node,
    Service,
)
from gpulint.rule import register
from gpulint.rules.orchestration.services import compose_facts, device_requests


@functools.cache
def _capabilities() -> frozenset[str]:
    return frozenset(compose_facts()["nvidia_capabilities"])


def _as_int(node: Node | None) -> int | None:
    if node is None or not node.is_scalar or isinstance(node.value, bool):
        return None
    if isinstance(node.value, int):
        return node.value
    text = (node.text() or "").strip()
    if re.fullmatch(r"[+-]?\d{1,18}", text):  # 5,000 digits: int() refuses them (ValueError)
        return int(text)
    return None


# -- GL703 ---------------------------------------------------------------------------------


@register
class InvalidGpuReservation(ManifestRule):
    code = "GL703"
    slug = "invalid-gpu-reservation"
    severity = Severity.ERROR
    manifest_kinds = frozenset({"compose"})
    summary = "A compose GPU device request that Docker refuses or cannot satisfy"
    what = """
        Checks every `deploy.resources.reservations.devices` entry and every `gpus:`
        list entry of a compose service: `count` together with `device_ids`; no
        `capabilities` (required in a device reservation); a capability the NVIDIA
        device driver does not accept (`gpu`, `nvidia`, `compute`, `compat32`,
        `graphics`, `utility`, `video`, `display`); a `count` that is neither a number
        nor `all`; with `--gpus-available N`, a `count` above N or a numeric
        device id that does not exist. Entries for another `driver:` than nvidia are
        not judged. `devices:` under `deploy.resources.limits` (where compose does
        not take them) is reported too.
    """
    why = """
        The daemon refuses such requests when the container starts ("cannot set both
        Count and DeviceIDs on device request", "could not select device driver
        \"nvidia\" with capabilities: [[cuda]]"), or the reservation can never be met -
        the service never runs, often found only on the GPU host.
    """
    example = """
        deploy:
          resources:
            reservations:
              devices:
                - driver: nvidia
                  count: 1
                  device_ids: ["0"]
    """
    instead = """
        Give either a count or device ids, and the gpu capability:

        deploy:
          resources:
            reservations:
              devices:
                - driver: nvidia
                  device_ids: ["0"]
                  capabilities: [gpu]
    """

    def check_manifest(self, ctx: ManifestContext) -> Iterator[Finding]:
        seen: set[int] = set()
        for service in ctx.services:
            for entry in device_requests(service):
                if id(entry) not in seen:
                    seen.add(id(entry))
                    yield from self._entry(ctx, service, entry, reservation=True)
            gpus = service.value("gpus")
            if gpus is not None and gpus.is_seq:
                for entry in gpus.seq:
                    if id(entry) not in seen:
                        seen.add(id(entry))
                        yield from self._entry(ctx, service, entry, reservation=False)
            elif gpus is not None and gpus.is_scalar:
                text = (gpus.text() or "").strip().lower()
                count = _as_int(gpus)
                if count is not None and ctx.gpus_available is not None and count > ctx.gpus_available:
                    yield self._too_many(service, gpus, count, ctx.gpus_available)
                elif count is None and text not in ("all", "") and not gpus.unresolved:
                    yield self.at(
                        gpus,
                        f"service '{service.name}': `gpus: {gpus.shown()}` is neither `all` nor a list of device requests",
                    )
            for entry in service.items("deploy", "resources", "limits", "devices"):
                if id(entry) not in seen:
                    seen.add(id(entry))
                    yield self.at(
                        entry,
                        f"service '{service.name}' lists GPU devices under deploy.resources.limits: compose takes "
                        "device requests only under deploy.resources.reservations",
                        help="move the entry to deploy.resources.reservations.devices",
                    )

    def _entry(
        self, ctx: ManifestContext, service: Service, entry: Node, reservation: bool
    ) -> Iterator[Finding]:
        where = "device reservation" if reservation else "`gpus:` entry"
        if not entry.is_map:
            return
        driver = (entry.text_at("driver") or "nvidia").lower()
        if driver != "nvidia":
            return  # another vendor's (or the cdi) driver: its rules are not ours
        count_node = entry.get("count")
        ids_node = entry.get("device_ids")
        if count_node is not None and ids_node is not None:
            yield self.at(
                entry.key_node("device_ids") or ids_node,
                f"service '{service.name}': this {where} sets both `count` and `device_ids`; the daemon refuses it "
                '("cannot set both Count and DeviceIDs on device request")',
                help="keep `device_ids` to pick GPUs, or `count` to ask for a number of them",
            )
        caps = entry.get("capabilities")
        if caps is None:
            if reservation:
                yield self.at(
                    entry,
                    f"service '{service.name}': this {where} has no `capabilities`; compose requires them and "
                    "the daemon picks the NVIDIA driver by them",
                    help="add `capabilities: [gpu]`",
                )
        else:
            yield from self._capabilities(service, where, caps)
        if count_node is not None and not count_node.unresolved:
            text = (count_node.text() or "").strip().lower()
            count = _as_int(count_node)
            if count is None and text != "all":
                yield self.at(
                    count_node,
                    f"service '{service.name}': `count: {count_node.shown()}` is neither a number nor `all`",
                )
            elif (
                count is not None
                and count != -1
                and ctx.gpus_available is not None
                and count > ctx.gpus_available
            ):
                yield self._too_many(service, count_node, count, ctx.gpus_available)
        if ids_node is not None and ids_node.is_seq and ctx.gpus_available is not None:
            for item in ids_node.seq:
                index = _as_int(item)
                if index is not None and index >= ctx.gpus_available:
                    yield self.at(
                        item,
                        f"service '{service.name}' asks for GPU {index}, but the host has {ctx.gpus_available} "
                        f"(--gpus-available): ids run from 0 to {ctx.gpus_available - 1}",
                    )

    def _capabilities(self, service: Service, where: str, caps: Node) -> Iterator[Finding]:
        if caps.is_scalar:
            if caps.value is None:
                yield self.at(
                    caps,
                    f"service '{service.name}': this {where} has empty `capabilities`",
                    help="write `capabilities: [gpu]`",
                )
            else:
                yield self.at(
                    caps,
                    f"service '{service.name}': `capabilities` must be a list, not `{caps.shown()}`",
                    help="write `capabilities: [gpu]`",
                )
            return
        if not caps.is_seq:
            return
        if not caps.seq:
            yield self.at(
                caps,
                f"service '{service.name}': this {where} has empty `capabilities`",
                help="write `capabilities: [gpu]`",
            )
            return
        for item in caps.seq:
            name = (item.text() or "").strip()
            if item.unresolved or not name:
                continue
            if name.lower() not in _capabilities():
                known = ", ".join(sorted(_capabilities()))
                yield self.at(
                    item,
                    f"service '{service.name}': `{item.shown()}` is not a capability the NVIDIA device driver "
                    f'accepts ({known}); the daemon refuses the request ("could not select device driver")',
                    help="use `capabilities: [gpu]`",
                )

    def _too_many(self, service: Service, node: Node, count: int, available: int) -> Finding:
        return self.at(
            node,
            f"service '{service.name}' reserves {count} GPUs but the host has {available} (--gpus-available): "
            "the container cannot start",
            help=f"reserve at most {available}, or `count: all`",
        )
