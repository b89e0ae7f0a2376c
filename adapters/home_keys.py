"""The home's own key (ADR-0078): one Ed25519 private key in ``HOME/keys/home.key`` (PEM,
0600, in a 0700 folder), made the first time a writable memory needs it. It signs the receipts
of erasures; a key-wrapping key derived from it (HKDF-SHA256) wraps the data keys of encrypted
exports in the home's keyring. Its public half is what a third party checks receipts with."""

from __future__ import annotations

from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fermix_memory.adapters.durable_file import create_durably
from fermix_memory.application.errors import StorageError

KEYS_DIR = "keys"
KEY_NAME = "home.key"
PUBLIC_PREFIX = "ed25519:"
_WRAP_INFO = b"fermix-memory keyring wrapping key v1"


def keys_folder(home: Path) -> Path:
    return home / KEYS_DIR


def public_key_text(key: Ed25519PublicKey) -> str:
    """``ed25519:`` and the raw public key in hex: what ``events head --public-key`` prints."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PUBLIC_PREFIX + raw.hex()


def parse_public_key(text: str) -> Ed25519PublicKey:
    """The key of a :func:`public_key_text` (surrounding blanks allowed); ``ValueError`` otherwise."""
    body = text.strip()
    if not body.startswith(PUBLIC_PREFIX):
        raise ValueError(f"a public key reads {PUBLIC_PREFIX}<64 hex digits>")
    try:
        raw = bytes.fromhex(body.removeprefix(PUBLIC_PREFIX))
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise ValueError(f"a public key reads {PUBLIC_PREFIX}<64 hex digits>") from None


def signature_holds(public_key: str, body: bytes, signature_hex: str) -> bool:
    """Whether ``signature_hex`` is ``public_key``'s Ed25519 signature of ``body``."""
    try:
        parse_public_key(public_key).verify(bytes.fromhex(signature_hex), body)
    except (InvalidSignature, ValueError):
        return False
    return True


class HomeKey:
    """The home's key, read from (or, with ``create``, first written to) its keys folder."""

    def __init__(self, folder: Path, *, create: bool = True) -> None:
        self.folder = folder
        self._key = self._load(folder / KEY_NAME, create)

    @staticmethod
    def _load(path: Path, create: bool) -> Ed25519PrivateKey:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if not create:
                raise StorageError(f"this home has no key yet ({path}): a writable memory makes it") from None
            return HomeKey._make(path)
        except OSError as exc:
            raise StorageError(f"cannot read the home's key {path}: {exc.strerror or exc}") from None
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except ValueError:
            raise StorageError(f"{path} is not an Ed25519 private key (PEM)") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise StorageError(f"{path} is not an Ed25519 private key (PEM)")
        return key

    @staticmethod
    def _make(path: Path) -> Ed25519PrivateKey:
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Whole or not at all, never replacing a key: another process opening the same new home
            # reads either no key or this one, never a half-written file.
            create_durably(path, pem, mode=0o600)
        except FileExistsError:  # another process made it meanwhile: theirs is the key
            return HomeKey._load(path, create=False)
        except OSError as exc:
            raise StorageError(f"cannot create the home's key {path}: {exc.strerror or exc}") from None
        return key

    def public_key(self) -> str:
        return public_key_text(self._key.public_key())

    def sign(self, body: bytes) -> str:
        """The Ed25519 signature of ``body``, in hex."""
        return self._key.sign(body).hex()

    def wrapping_key(self) -> bytes:
        """32 bytes derived from the private key: the AES key that wraps the keyring's data keys."""
        raw = self._key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                      serialization.NoEncryption())
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_WRAP_INFO).derive(raw)

