"""A tool's result as the text a controller reads.

Text content is kept as it is; images, audio and binary resources are saved to files in the working folder
(``mcp_files/``) and named, with their type and size; a resource link is named by its URI; structured content is
shown as JSON when the tool gave no text. A text longer than the limit is cut (its head kept) and saved whole to a
file the cut names, so the model can read the rest with another command, and the user has it.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
import re
import time
from typing import Any, Dict, List, Optional, Tuple

FOLDER = "mcp_files"
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/jpg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/svg+xml": ".svg",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "application/pdf": ".pdf",
    "application/json": ".json",
    "text/plain": ".txt",
    "text/csv": ".csv",
    "text/html": ".html",
}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
_numbers = itertools.count(1)


def _new_path(folder: str, stem: str, extension: str) -> str:
    """A new file in ``folder`` (made if need be): ``<time>_<stem>_<n><extension>``, never one that exists."""
    os.makedirs(folder, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    while True:
        path = os.path.join(folder, f"{stamp}_{_SAFE.sub('_', stem)[:80]}_{next(_numbers)}{extension}")
        try:
            with open(path, "xb"):
                return path
        except FileExistsError:
            continue


def _shown(path: str, workdir: str) -> str:
    relative = os.path.relpath(path, workdir)
    return path if relative.startswith(os.pardir) else relative


def _save_blob(data: str, mime: str, workdir: str, stem: str, what: str, files: List[str]) -> str:
    """Decode a base64 payload into a file (added to ``files``); the line that names it (or says why it could not
    be kept)."""
    try:
        raw = base64.b64decode(data or "", validate=False)
    except (binascii.Error, ValueError) as error:
        return f"[{what} ({mime}) the tool sent could not be decoded: {error}]"
    path = _new_path(os.path.join(workdir, FOLDER), stem, _EXTENSIONS.get(mime.lower(), ".bin"))
    with open(path, "wb") as f:
        f.write(raw)
    files.append(path)
    return f"[{what} ({mime}, {len(raw):,} bytes) saved to {_shown(path, workdir)}]"


def result_text(result: Dict[str, Any], workdir: str, stem: str) -> Tuple[str, List[str]]:
    """The text of a ``tools/call`` result, and the files its binary parts were saved to.

    :param result: the result (``content``, ``structuredContent``, ``isError``).
    :param workdir: the working folder: files go to its ``mcp_files/``.
    :param stem: what the files' names begin with (``server__tool``).
    """
    parts: List[str] = []
    content = result.get("content") if isinstance(result.get("content"), list) else []
    files: List[str] = []
    for item in content:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text") or ""))
        elif kind in ("image", "audio"):
            parts.append(
                _save_blob(
                    str(item.get("data") or ""),
                    str(item.get("mimeType") or f"{kind}/unknown"),
                    workdir,
                    stem,
                    f"an {kind}" if kind == "image" else "audio",
                    files,
                )
            )
        elif kind == "resource":
            resource = item.get("resource") if isinstance(item.get("resource"), dict) else {}
            uri = resource.get("uri") or "(no uri)"
            if isinstance(resource.get("text"), str):
                parts.append(f"[resource {uri}]\n{resource['text']}")
            else:
                saved = _save_blob(
                    str(resource.get("blob") or ""),
                    str(resource.get("mimeType") or "application/octet-stream"),
                    workdir,
                    stem,
                    f"the resource {uri}",
                    files,
                )
                parts.append(saved)
        elif kind == "resource_link":
            name = item.get("name") or item.get("title") or ""
            parts.append(f"[a link to the resource {item.get('uri')}{f' ({name})' if name else ''}]")
        else:
            parts.append(f"[content of type {kind!r}: {json.dumps(item, ensure_ascii=False)[:300]}]")
    if not any(part.strip() for part in parts) and "structuredContent" in result:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False, indent=1, default=str))
    text = "\n".join(parts).strip()
    return text or "(the tool returned nothing)", files


def bounded(text: str, limit: int, workdir: str, stem: str) -> Tuple[str, Optional[str]]:
    """``text`` if it fits ``limit`` characters; else its head with a line saying how long it is and the file its
    whole is saved to (the path, second)."""
    if limit <= 0 or len(text) <= limit:
        return text, None
    path = _new_path(os.path.join(workdir, FOLDER), stem, ".txt")
    with open(path, "w", encoding="utf-8", errors="replace") as f:
        f.write(text)
    note = (
        f"\n[... the result is {len(text):,} characters long: cut here; the whole of it is in {_shown(path, workdir)}]"
    )
    head = text[: max(0, limit - len(note))]
    return head + note, path
