"""The keyring an encrypted export is sealed with, and opened with on import (ADR-0081): the
keys folder of a home (``HOME/keys``: ``home.key`` and ``keyring.json``)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from fermix_memory.adapters.home_keys import KEY_NAME, HomeKey, keys_folder
from fermix_memory.adapters.keyring import KEYRING_NAME, Keyring
from fermix_memory.application.errors import EventFileError, StorageError
from fermix_memory.application.sealed_import import SealedOpening


def home_keyring(home: Path, *, make_key: bool = True) -> Keyring:
    """The keyring of ``home`` (made when missing: an export seals); ``make_key``: make the home
    key too when missing (a writable memory; a read-only one never makes it, ADR-0078)."""
    folder = keys_folder(home)
    return Keyring(folder, HomeKey(folder, create=make_key).wrapping_key())


def existing_keyring(folder: Path) -> Keyring:
    """The keyring in the keys folder ``folder`` as it is: :class:`EventFileError` when it holds
    no home key or no keyring (nothing made there)."""
    for name in (KEY_NAME, KEYRING_NAME):
        if not (folder / name).is_file():
            raise EventFileError(f"the file is an encrypted export, and {folder} holds no {name}: give the keys"
                                 " folder of the home that exported it (--keys DIR)")
    try:
        return Keyring(folder, HomeKey(folder, create=False).wrapping_key())
    except StorageError as exc:
        raise EventFileError(str(exc)) from None


def opening(folder: Path, at: datetime) -> SealedOpening:
    """Opens an encrypted export with the keys in ``folder`` (read only if the file is sealed)."""
    return SealedOpening(lambda: existing_keyring(folder), at)
