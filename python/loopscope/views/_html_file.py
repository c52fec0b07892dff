"""The notebook view as a file of its own: the HTML fragment a notebook
shows (_html.render) wrapped in a page a browser opens, written whole or
not at all."""
from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any


class HtmlFileError(OSError):
    """The page could not be written; the message names the file and why."""


def title(summary: dict[str, Any]) -> str:
    """The page's title: the verdict and the step count."""
    return (f"loopscope - {summary['diagnosis']['verdict']}, "
            f"{len(summary['steps'])} steps")


def page(fragment: str, title: str = "loopscope") -> str:
    """A complete HTML5 page around a view fragment."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n</head>\n<body>\n{fragment}\n</body>\n"
            "</html>\n")


def write_page(fragment: str, path: str | os.PathLike, title: str = "loopscope") -> str:
    """Writes page(fragment) to path through a temporary file beside it (a
    reader never sees half a page); returns the path as a str."""
    target = Path(path)
    if target.is_dir():
        raise HtmlFileError(f"save_html: {path} is a directory; give a file name (view.html)")
    folder = target.parent
    if not folder.is_dir():
        raise HtmlFileError(f"save_html: {path}: the folder {folder} does not exist")
    tmp = folder / f".{target.name}.{os.getpid()}.tmp"
    try:
        tmp.write_text(page(fragment, title), encoding="utf-8")
        os.replace(tmp, target)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise HtmlFileError(f"save_html: cannot write {path}: "
                            f"{error.strerror or error}") from None
    return str(target)
