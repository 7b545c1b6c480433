"""This machine's relay keys: one private file, never the database.

`relay-keys.json` in the data directory (beside the store's secret), mode 600 in a
directory only its owner can enter, holds the relay's URL, this machine's device name,
the relay secret (on the operator's machine only: it makes invites), and per bridged room
the room key (AES-256) and the device token. A file that is not this user's, or that
others can read, is refused naming it; it is written whole and renamed into place, under
a lock, so two commands at once never lose each other's room.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from relay import crypto

FILENAME = "relay-keys.json"


class KeysError(Exception):
    """The keys file cannot be used; the message names it and the fix."""


@dataclass
class RoomKeys:
    key: bytes
    token: str


@dataclass
class Keys:
    relay: str = ""
    device: str = ""
    secret: str = ""
    rooms: dict[str, RoomKeys] = field(default_factory=dict)


def default_path() -> Path:
    from django.conf import settings

    return Path(settings.DATA_DIR) / FILENAME


def _check_private(path: Path) -> None:
    info = path.stat()
    if info.st_uid != os.getuid():
        raise KeysError(f"{path} is not owned by this user: remove it or fix its owner")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeysError(
            f"{path} can be read by other users (mode {stat.S_IMODE(info.st_mode):o}): it "
            f"holds room keys and tokens; run `chmod 600 {path}`"
        )


def load(path: Path | None = None) -> Keys:
    """The keys (empty when the file does not exist yet)."""
    path = path or default_path()
    try:
        _check_private(path)
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Keys()
    except (OSError, ValueError) as exc:
        raise KeysError(f"{path} cannot be read ({exc}); move it away to start over") from None
    try:
        rooms = {
            name: RoomKeys(key=crypto.unb64(room["key"], "a room key"), token=room["token"])
            for name, room in data.get("rooms", {}).items()
        }
        return Keys(
            relay=data.get("relay", ""),
            device=data.get("device", ""),
            secret=data.get("secret", ""),
            rooms=rooms,
        )
    except (AttributeError, KeyError, TypeError, crypto.CryptoError):
        raise KeysError(f"{path} is damaged; move it away to start over") from None


def save(keys: Keys, path: Path | None = None) -> None:
    path = path or default_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = {
        "v": 1,
        "relay": keys.relay,
        "device": keys.device,
        "secret": keys.secret,
        "rooms": {
            name: {"key": crypto.b64(room.key), "token": room.token}
            for name, room in sorted(keys.rooms.items())
        },
    }
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        draft.unlink()
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    os.replace(draft, path)


@contextlib.contextmanager
def editing(path: Path | None = None) -> Iterator[Keys]:
    """Load, let the caller change, save: under an exclusive lock on a file beside it.
    Nothing is saved when the caller raises."""
    path = path or default_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        keys = load(path)
        yield keys
        save(keys, path)
    finally:
        os.close(lock)


def stamp(path: Path | None = None) -> tuple[int, int] | None:
    """(mtime_ns, size) of the file, or None: the bridge re-reads it when this changes."""
    try:
        info = (path or default_path()).stat()
    except FileNotFoundError:
        return None
    return info.st_mtime_ns, info.st_size
