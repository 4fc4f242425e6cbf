"""MkDocs hook: the pages link files of the repository outside ``docs/`` (the stored results in
``benchmarks/results/``) as ``../benchmarks/results/...``, the path that works in a checkout and on a forge. The
built site has no ``..``, so each linked file is added to the site under ``repo/`` and the links are rewritten to
it. A link to a file that does not exist is left as written, and ``mkdocs build --strict`` fails on it."""

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel

#: A Markdown link target that leaves the docs folder: ``](../path`` up to its closing parenthesis or anchor.
REPO_LINK = re.compile(r"\]\(\.\./([^)#\s]+)")
SITE_FOLDER = "repo"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add every existing repository file that a page links to the site's ``repo/`` folder, outside the navigation."""
    docs = Path(config.docs_dir)
    root = docs.parent.resolve()
    for page in sorted(docs.glob("*.md")):
        for target in REPO_LINK.findall(page.read_text(encoding="utf-8")):
            source = (root / target).resolve()
            uri = f"{SITE_FOLDER}/{target}"
            if source.is_file() and root in source.parents and files.get_file_from_path(uri) is None:
                # Reached from the page that links it, not from the navigation.
                files.append(File.generated(config, uri, abs_src_path=str(source), inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown: str, page, config: MkDocsConfig, files: Files) -> str:
    """Point a top-level page's ``../`` links at the copies :func:`on_files` added."""
    if "/" in page.file.src_uri:
        return markdown
    return REPO_LINK.sub(lambda match: f"]({SITE_FOLDER}/{match.group(1)}", markdown)
