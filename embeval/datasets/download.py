"""Downloading one file over http(s) or from a file:// mirror, resumable.

Bytes go to NAME.part next to the target; an interrupted download leaves the .part file, and the
next run asks the server for the rest (HTTP Range) or seeks in the mirror file. The .part file is
renamed to the target only once complete. Every failure is one EmbevalError naming the URL.
"""

import http.client
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from embeval._version import __version__
from embeval.datasets import files
from embeval.errors import EmbevalError

TIMEOUT_S = 60


class FatalFetchError(EmbevalError):
    """A failure that every other download would meet too (unreachable server, unwritable disk)."""


class ServerUnreachable(FatalFetchError):
    """No connection to the server (refused, no route, name not resolved, timed out)."""


def mirror_url(base, name):
    """The URL of a file in a mirror: base URL or folder + the file's upstream name."""
    if "://" not in base:
        base = Path(base).resolve().as_uri()
    return base.rstrip("/") + "/" + urllib.parse.quote(name)


def _progress_bar(name, total, initial, enabled):
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=name,
        leave=False,
        disable=not enabled,
        file=sys.stderr,
    )


def download(url, target, task, progress=False):
    """Fetch url into target (resuming target.part); returns the target path."""
    target = Path(target)
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    if urllib.parse.urlsplit(url).scheme == "file":
        _from_file(url, part, have, task, progress, target.name)
    else:
        _from_http(url, part, have, task, progress, target.name)
    os.replace(part, target)
    return target


def _from_file(url, part, have, task, progress, name):
    source = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    if not source.is_file():
        raise EmbevalError("not found in the mirror", file=url, task=task)
    total = source.stat().st_size
    if have > total:
        have = 0
    with open(source, "rb") as stream:
        stream.seek(have)
        _copy(stream, part, have, total, url, task, progress, name)


def _from_http(url, part, have, task, progress, name, retried=False):
    headers = {"User-Agent": f"embeval/{__version__}"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have and not retried:
            files.remove_file(part)
            return _from_http(url, part, 0, task, progress, name, retried=True)
        raise EmbevalError(f"HTTP {err.code} {err.reason}", file=url, task=task)
    except urllib.error.URLError as err:
        raise ServerUnreachable(f"cannot reach the server ({getattr(err, 'reason', err)})", file=url, task=task)
    except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
        raise ServerUnreachable(f"cannot reach the server ({err or type(err).__name__})", file=url, task=task)
    with response:
        if have and response.status != 206:
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        _copy(response, part, have, total, url, task, progress, name)


def _copy(stream, part, have, total, url, task, progress, name):
    size = have
    try:
        out = files.create(part, append=have > 0)
    except OSError as err:
        raise FatalFetchError(f"cannot write: {files.describe(err)}", file=part, task=task)
    bar = _progress_bar(name, total, have, progress)
    try:
        with out:
            while True:
                try:
                    chunk = stream.read(files.CHUNK)
                except (http.client.IncompleteRead, http.client.HTTPException, OSError):
                    break
                if not chunk:
                    break
                out.write(chunk)
                size += len(chunk)
                bar.update(len(chunk))
    except OSError as err:
        raise FatalFetchError(f"cannot write: {files.describe(err)}", file=part, task=task)
    finally:
        bar.close()
    if total is not None and size < total:
        raise EmbevalError(
            f"download interrupted after {size} of {total} bytes; run the same command again to resume it",
            file=url,
            task=task,
        )
