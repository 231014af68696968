"""Renders pages of a study's paper as the PNG images the README shows (docs/figures/paper-page-N.png).

    .venv/bin/python benchmarks/paper_pages.py results/report/paper.pdf docs/figures --pages 1 4 5 7

Each page N becomes OUT/paper-page-N.png (pdftoppm at --dpi, a 64-colour palette); without --pages, the first page
and the pages that hold the paper's inference figure, its inference tables and the micro-benchmark figure, found by
their captions (which pages those are depends on the study). Prints the README's row of thumbnails for the pages
written.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from PIL import Image

from fwbench.analysis.paper.pdf_check import page_texts

# What the default pages show, found by the start of their captions.
CAPTIONS = (
    "Inference throughput against batch size",
    "Inference throughput (img/s",
    "Micro-benchmarks against batch size",
)


def default_pages(pdf: str | Path) -> list[int]:
    """Page 1 and the first page holding each of CAPTIONS (in page order, each once)."""
    texts = [" ".join(text.split()) for text in page_texts(pdf)]
    found = {1}
    for caption in CAPTIONS:
        page = next((n for n, text in enumerate(texts, start=1) if caption.lower() in text.lower()), None)
        if page is not None:
            found.add(page)
    return sorted(found)


def render(pdf: str | Path, out_dir: str | Path, pages: list[int], dpi: int) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for page in pages:
        target = out / f"paper-page-{page}"
        subprocess.run(
            [
                "pdftoppm",
                "-r",
                str(dpi),
                "-f",
                str(page),
                "-l",
                str(page),
                "-png",
                "-singlefile",
                str(pdf),
                str(target),
            ],
            check=True,
        )
        image = target.with_suffix(".png")
        with Image.open(image) as png:  # a 64-colour palette: a third of the size, no visible loss on a page
            small = png.convert("RGB").quantize(colors=64)
        small.save(image, optimize=True)
        written.append(image)
    return written


def markdown(images: list[Path], root: Path) -> str:
    """One row of thumbnails, each linking to its full-size image."""
    cells = []
    for image in images:
        path = image.resolve().relative_to(root.resolve()) if image.resolve().is_relative_to(root.resolve()) else image
        page = image.stem.rsplit("-", 1)[1]
        cells.append(f'<a href="{path}"><img src="{path}" width="24%" alt="Page {page} of the paper"></a>')
    return "<p>\n" + "\n".join(cells) + "\n</p>"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf", help="the paper, e.g. results/report/paper.pdf")
    parser.add_argument("out", help="the folder for the images, e.g. docs/figures")
    parser.add_argument("--pages", type=int, nargs="+", help="page numbers (default: see above)")
    parser.add_argument("--dpi", type=int, default=90, help="resolution of the images (default 90)")
    args = parser.parse_args(argv)
    pages = args.pages or default_pages(args.pdf)
    images = render(args.pdf, args.out, pages, args.dpi)
    for image in images:
        print(f"{image} ({image.stat().st_size // 1024} KiB)", file=sys.stderr)
    print(markdown(images, Path.cwd()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
