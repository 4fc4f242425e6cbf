"""Prints the share of the package's non-blank lines that are prose (docstrings and comments), per package and in
all, and the package's total lines.

    python benchmarks/prose_share.py [PACKAGE_DIR]     # default: gpubench

A line counts as prose when it belongs to a module, class or function docstring, or holds a comment token.
"""

import ast
import io
import sys
import tokenize
from collections import defaultdict
from pathlib import Path


def prose_lines(source: str) -> tuple[int, int]:
    """(prose lines, non-blank lines) of one module's source."""
    lines = source.splitlines()
    non_blank = {number for number, line in enumerate(lines, start=1) if line.strip()}
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            value = getattr(first, "value", None)
            if isinstance(first, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    comments = {token.start[0] for token in tokens if token.type == tokenize.COMMENT}
    return len((docstrings | comments) & non_blank), len(non_blank)


def main(package: Path) -> None:
    by_package: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        prose, non_blank = prose_lines(source)
        counts = by_package[str(path.parent.relative_to(package.parent))]
        counts[0] += prose
        counts[1] += non_blank
        counts[2] += len(source.splitlines())
    print(f"{'package':<28} {'prose':>6} {'non-blank':>9} {'share':>6} {'lines':>6}")
    for name, (prose, non_blank, lines) in sorted(by_package.items()):
        print(f"{name:<28} {prose:>6} {non_blank:>9} {prose / non_blank:>6.1%} {lines:>6}")
    prose, non_blank, lines = (sum(counts[i] for counts in by_package.values()) for i in range(3))
    print(f"{'all':<28} {prose:>6} {non_blank:>9} {prose / non_blank:>6.1%} {lines:>6}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "gpubench"))
