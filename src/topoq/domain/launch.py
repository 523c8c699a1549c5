"""What a pod may be launched with: the fields of a pod set that reach a process, its
environment, its container image or a name the executor derives from them.

An executor starts every pod of an admitted gang; a field it cannot use (an environment
variable named ``A=B``, a NUL in an argument, an argument longer than the kernel takes) would
make the start fail after the gang's capacity was booked. Intake checks them first, each
``InvalidInputError`` naming the field and the rule. The bounds stay well inside Linux's
(``MAX_ARG_STRLEN`` is 128 KiB per string, ``ARG_MAX`` 2 MiB for argv and environment
together, including what the executor adds).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from topoq.domain.errors import InvalidInputError, InvalidRequestError

MAX_ARGUMENTS = 1024
"""Words of a pod's command (``command`` and ``args`` together)."""
MAX_ARGUMENT_CHARS = 32 * 1024
"""One word of a command."""
MAX_VARIABLES = 1024
"""Environment variables of a pod set."""
MAX_VARIABLE_NAME_CHARS = 255
MAX_VARIABLE_CHARS = 32 * 1024
"""One environment variable's value."""
MAX_LAUNCH_BYTES = 1024 * 1024
"""A pod's command and environment together, in UTF-8 (half of Linux's ``ARG_MAX``)."""
MAX_IMAGE_CHARS = 4096
"""A container image reference (``registry/repository:tag@sha256:…``); real ones are far
shorter, the bound keeps a pasted document out of every pod."""
IMAGE_RULE = "an image reference such as pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"

VARIABLE_NAME_RULE = (
    "an environment variable name is a POSIX name, [A-Za-z_][A-Za-z0-9_]*, e.g. NCCL_DEBUG"
)
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUL_HINT = "a process cannot take a NUL (\\u0000) in its arguments or environment"


def check_environment(environment: Mapping[str, str], *, where: str) -> None:
    """POSIX names, bounded values, no NUL; ``where`` names the environment mapping."""
    if len(environment) > MAX_VARIABLES:
        raise InvalidInputError(
            f"{len(environment):,} environment variables",
            where=where,
            hint=f"a pod set has at most {MAX_VARIABLES:,}",
        )
    for name, value in environment.items():
        if len(name) > MAX_VARIABLE_NAME_CHARS or not _VARIABLE_NAME.fullmatch(name):
            raise InvalidInputError(
                f"{name!r:.80} is not an environment variable name",
                where=where,
                hint=VARIABLE_NAME_RULE,
            )
        _check_process_text(
            value, where=f"{where}.{name}", what="value", max_chars=MAX_VARIABLE_CHARS
        )


def check_command(command: Sequence[str], *, where: str) -> None:
    """A bounded argv of non-empty words without NUL; ``where`` names the command."""
    if len(command) > MAX_ARGUMENTS:
        raise InvalidInputError(
            f"the command has {len(command):,} words",
            where=where,
            hint=f"a command has at most {MAX_ARGUMENTS:,} (command and args together)",
        )
    for index, word in enumerate(command):
        _check_process_text(
            word, where=f"{where}[{index}]", what="word", max_chars=MAX_ARGUMENT_CHARS
        )
    if command and not command[0]:
        raise InvalidInputError(
            "the program to run is empty", where=f"{where}[0]", hint="name a program, e.g. python"
        )


def check_launch_size(
    command: Sequence[str], environment: Mapping[str, str], *, where: str
) -> None:
    """The command and environment together fit what the kernel takes with room to spare."""
    size = sum(len(word.encode()) + 1 for word in command)
    size += sum(len(name.encode()) + len(value.encode()) + 2 for name, value in environment.items())
    if size > MAX_LAUNCH_BYTES:
        raise InvalidInputError(
            f"the command and environment take {size:,} bytes",
            where=where,
            hint=f"together they are at most {MAX_LAUNCH_BYTES // 1024:,} KiB",
        )


def check_image(image: str, *, where: str) -> None:
    """A container image reference: not empty, bounded, no whitespace or control character.
    Its grammar (registry, repository, tag, digest) is the container runtime's to check."""
    if not image:
        raise InvalidRequestError(
            "the image is empty", where=where, hint=f"name {IMAGE_RULE}, or leave it out"
        )
    if len(image) > MAX_IMAGE_CHARS:
        raise InvalidRequestError(
            f"an image of {len(image):,} characters",
            where=where,
            hint=f"an image reference is at most {MAX_IMAGE_CHARS:,} characters",
        )
    if any(char.isspace() or not char.isprintable() for char in image):
        raise InvalidRequestError(
            f"the image {image!r:.80} holds whitespace or a control character",
            where=where,
            hint=f"write {IMAGE_RULE}, without spaces",
        )


def _check_process_text(text: str, *, where: str, what: str, max_chars: int) -> None:
    """One string a process is given (an argument, a variable's value): no NUL, bounded."""
    if "\x00" in text:
        raise InvalidInputError(f"the {what} holds a NUL character", where=where, hint=_NUL_HINT)
    if len(text) > max_chars:
        raise InvalidInputError(
            f"a {what} of {len(text):,} characters",
            where=where,
            hint=f"a {what} is at most {max_chars:,} characters (pass more in a file)",
        )
