"""
A small Phoenix Channels agent in Python on websockets (Debian's python3-websockets 10.4), for
`phoenix-link conform`: the V2 JSON protocol by hand, as a team without a Phoenix client library
writes it. It joins the control channel, sends a heartbeat every 30 s, reconnects after any close
with a backoff of 1 s doubling to 30 s, stops for good on a `supersede` push and on an upgrade
refused with 400, 401, 403 or 409, and closes its socket with 1000 on SIGTERM.

Run: `npx phoenix-link conform -- /usr/bin/python3 examples/conform/python_agent.py` (Debian's
python3, which has python3-websockets; a pyenv or venv `python3` without the websockets module
fails every scenario with ModuleNotFoundError)
"""
import asyncio
import itertools
import json
import os
import signal
import sys
import urllib.parse

import websockets

URL = os.environ["PHOENIX_LINK_URL"]
AGENT_ID = os.environ["PHOENIX_LINK_AGENT_ID"]
API_KEY = os.environ["PHOENIX_LINK_API_KEY"]
TOPIC = os.environ.get("PHOENIX_LINK_CONTROL_TOPIC", f"agent_control:{AGENT_ID}")
TERMINAL_STATUSES = {400, 401, 403, 409}
refs = itertools.count(1)


class Terminal(Exception):
    """The session ended for good."""


async def heartbeat(ws):
    while True:
        await asyncio.sleep(30)
        await ws.send(json.dumps([None, str(next(refs)), "phoenix", "heartbeat", {}]))


async def session(stopping):
    query = urllib.parse.urlencode({"vsn": "2.0.0", "agent_id": AGENT_ID})
    async with websockets.connect(f"{URL}/websocket?{query}", extra_headers={"x-api-key": API_KEY}, ping_interval=None) as ws:
        join_ref = str(next(refs))
        await ws.send(json.dumps([join_ref, join_ref, TOPIC, "phx_join", {}]))
        beat = asyncio.ensure_future(heartbeat(ws))
        stop = asyncio.ensure_future(stopping.wait())
        try:
            while True:
                receive = asyncio.ensure_future(ws.recv())
                done, _ = await asyncio.wait({receive, stop}, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    receive.cancel()
                    await ws.close(1000)
                    return
                _, ref, topic, event, payload = json.loads(receive.result())
                if event == "supersede":
                    await ws.close(1000)
                    raise Terminal("superseded")
                if event == "phx_reply" and ref == join_ref and payload.get("status") != "ok":
                    await ws.close(1000)
                    raise Terminal(f"join refused: {payload}")
                if event == "phx_error" and topic == TOPIC:
                    join_ref = str(next(refs))
                    await ws.send(json.dumps([join_ref, join_ref, TOPIC, "phx_join", {}]))
                if event == "agent.control":
                    print("control", json.dumps(payload), flush=True)
        except websockets.ConnectionClosed:
            return
        finally:
            beat.cancel()
            stop.cancel()


async def main():
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    delay = 1.0
    while not stopping.is_set():
        try:
            await session(stopping)
            delay = 1.0
        except Terminal as end:
            print("ended:", end, flush=True)
            return 2
        except websockets.InvalidStatusCode as refused:
            if refused.status_code in TERMINAL_STATUSES:
                print("refused:", refused.status_code, flush=True)
                return 2
        except (OSError, websockets.WebSocketException) as lost:
            print("lost:", lost, flush=True)
        if stopping.is_set():
            break
        try:
            await asyncio.wait_for(stopping.wait(), timeout=delay)
        except asyncio.TimeoutError:
            pass
        delay = min(delay * 2, 30.0)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
