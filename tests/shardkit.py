"""Small corpora and the token stores prepared from them, written by the test itself."""

from pathlib import Path

from zoo.tasks.shard_prepare import Preparation, PrepareSettings

WORDS = ["the", "cat", "sat", "on", "a", "mat", "while", "the", "dog", "ran", "in", "a", "park", "and", "birds", "sang",
         "über", "den", "Bäumen;", "naïve", "café", "def", "return", "import", "class", "lambda"]


def document(number: int) -> str:
    """A deterministic document of a few lines, each of a few words."""
    lines = [" ".join(WORDS[(number * 7 + line * 5 + word * 3) % len(WORDS)] for word in range(3 + (number + line) % 7))
             for line in range(1 + number % 4)]
    return "\n".join(lines) + f"\n# {number}"


def corpus_folder(folder: Path, documents: int = 120) -> Path:
    """A folder of text files, a document each (two subfolders, sorted by path)."""
    for number in range(documents):
        path = folder / f"part{number % 2}" / f"doc{number:04d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document(number), encoding="utf-8")
    return folder


SETTINGS = PrepareSettings(vocab_size=120, valid_share=0.1, test_share=0.1, shard_tokens=400)
"""Tiny shards (about 400 ids), so that every split spans several."""


def prepare(sources, out: Path, settings: PrepareSettings = SETTINGS, **options) -> dict:
    return Preparation([str(s) for s in sources], out, settings, command="zoo data prepare (test)", progress=False,
                       **options).run()


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every file of a store by name (the lock aside): what two preparations must write alike."""
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.name != ".lock"}
