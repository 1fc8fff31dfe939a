"""The reference server's mounted config, reloaded in place (``--config-dir``): ``GET /config``
answers the hash the config-consistency check computes for the ConfigMap, and a new one once
the files change, without a restart; ``wait_served`` times that through the server's answers."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from mcp_checks.api import ConfigContent, config_hash, wait_served
from mcp_refserver import RefServerConfig, start_refserver


def _hash(data: dict[str, str]) -> str:
    return config_hash([ConfigContent("ConfigMap", "srv-config", data, {})])


async def _config(url: str) -> dict[str, object]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/config") as resp:
        assert resp.status == 200
        body: dict[str, object] = await resp.json()
        return body


async def test_the_server_reloads_its_mounted_config_and_says_which_it_runs(tmp_path: Path) -> None:
    (tmp_path / "mode").write_text("v1")
    (tmp_path / "..data").mkdir()  # the kubelet's own entries are not keys
    config = RefServerConfig(config_dir=str(tmp_path), config_map="srv-config", server_name="srv-0")
    async with await start_refserver(config) as srv:
        first = await _config(srv.url)
        assert first == {
            "server": "srv-0",
            "hash": _hash({"mode": "v1"}),
            "reloads": 0,
            "loadedAt": first["loadedAt"],
        }
        (tmp_path / "mode").write_text("v2")
        (tmp_path / "extra").write_text("1")
        took, seen = await wait_served(
            srv.url + "/config", _hash({"mode": "v2", "extra": "1"}), {"srv-0"}, 10.0
        )
        assert took is not None and took < 5.0, seen
        assert (await _config(srv.url))["reloads"] == 1
        # a server that never gets there: no time, and what it answered
        never, seen = await wait_served(srv.url + "/config", _hash({"mode": "v3"}), {"srv-0"}, 0.5)
        assert never is None and seen == {"srv-0": _hash({"mode": "v2", "extra": "1"})}
        # a pod that is not there is waited for, not assumed
        gone, _ = await wait_served(
            srv.url + "/config", _hash({"mode": "v2", "extra": "1"}), {"srv-0", "srv-1"}, 0.5
        )
        assert gone is None


async def test_without_a_config_dir_there_is_no_config_to_report() -> None:
    async with (
        await start_refserver(RefServerConfig()) as srv,
        aiohttp.ClientSession() as session,
        session.get(f"{srv.url}/config") as resp,
    ):
        assert resp.status == 404
