"""`zoo data prepare` and `zoo data verify`: a corpus into a token store, and a store checked
file by file against its index."""

from __future__ import annotations

import argparse
import json

from zoo.commands import Command, register


@register("data", 120)
class DataCommand(Command):
    """prepare a corpus as memory-mapped token shards, or verify a prepared store"""

    def run(self, args: argparse.Namespace) -> None:
        args.action(args)

    def add_args(self, data: argparse.ArgumentParser) -> None:
        actions = data.add_subparsers(dest="data_command", required=True, metavar="{prepare,verify}")

        prepare = actions.add_parser("prepare", help="tokenize a corpus into a token store that lm_shards trains from")
        prepare.add_argument("sources", nargs="+", metavar="SOURCE",
                             help="text files (.txt, a document a line or --separator), folders (a file a document), "
                             ".jsonl, .parquet or .arrow files; with --pair, one folder of a parallel corpus's split files")
        prepare.add_argument("--out", required=True, help="the store's folder (new or empty; the same one to resume)")
        tokenizer = prepare.add_mutually_exclusive_group()
        tokenizer.add_argument("--vocab-size", type=int, default=8000, help="learn a tokenizer of this many tokens on the "
                               "training split (default 8000)")
        tokenizer.add_argument("--tokenizer", dest="tokenizer_dir", metavar="DIR",
                               help="a transformers tokenizer folder (tokenizer.json) instead of learning one")
        prepare.add_argument("--tokenizer-kind", choices=("bpe", "bytes"), default="bpe",
                             help="what to learn: BPE over words (<unk> for unseen characters), or byte-level BPE (GPT-2's, "
                             "covers every text)")
        prepare.add_argument("--valid-share", type=share, default=0.005, help="the share of documents held out for "
                             "validation, by a hash of their text (default 0.005)")
        prepare.add_argument("--test-share", type=share, default=0.005, help="likewise for the test split (default 0.005)")
        prepare.add_argument("--separator", help="a line of exactly this text ends a document of a text file")
        prepare.add_argument("--field", default="text", help="the text field of JSON lines, Parquet and Arrow rows")
        prepare.add_argument("--suffix", help="read only the files of a folder whose names end so (.py, say)")
        prepare.add_argument("--pair", help="a parallel corpus: SRC-TGT (de-en), its splits kept as they are")
        prepare.add_argument("--splits", default="train,valid,test", help="with --pair: the corpus's train, valid and test "
                             "split names (default train,valid,test)")
        prepare.add_argument("--format", default="auto", help="with --pair: the corpus format (default auto)")
        prepare.add_argument("--shard-tokens", type=int, default=100_000_000, help="ids a shard holds before the next one "
                             "starts (default 100,000,000)")
        prepare.add_argument("--max-unknown", type=share, default=0.001, help="the most of a split's ids that may be <unk> "
                             "(default 0.001)")
        prepare.add_argument("--workers", type=int, default=1, help="processes that encode (default 1; the tokenizer "
                             "uses threads of its own either way)")
        prepare.set_defaults(action=prepare_store)

        verify = actions.add_parser("verify", help="check every file of a token store against its index (size, SHA-256, "
                                    "ids inside the vocabulary)")
        verify.add_argument("folder")
        verify.set_defaults(action=verify_store)


def share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text}: a share from 0 up to (not including) 1")
    return value


def prepare_store(args: argparse.Namespace) -> None:
    from zoo.errors import ConfigError
    from zoo.tasks.shard_prepare import Preparation, PrepareSettings
    from zoo.tasks.shard_sources import Reading

    pair = tuple(args.pair.split("-")) if args.pair else None
    splits = tuple(args.splits.split(","))
    if pair is not None and len(pair) != 2:
        raise ConfigError(f"--pair {args.pair}: SRC-TGT, two languages (de-en)")
    if len(splits) != 3:
        raise ConfigError(f"--splits {args.splits}: three names, train,valid,test")
    settings = PrepareSettings(tokenizer=args.tokenizer_kind, vocab_size=args.vocab_size,
                               tokenizer_dir=args.tokenizer_dir, valid_share=args.valid_share, test_share=args.test_share,
                               reading=Reading(args.separator, args.field, args.suffix), pair=pair, format=args.format,
                               parallel_splits=splits, shard_tokens=args.shard_tokens, max_unknown=args.max_unknown)
    index = Preparation(args.sources, args.out, settings, workers=args.workers).run()
    print(json.dumps({"store": args.out, "vocab_size": index["vocab_size"], "dtype": index["dtype"],
                      "splits": {split: {stream: {key: part[key] for key in ("documents", "tokens", "bytes")}
                                         for stream, part in streams.items()} for split, streams in index["splits"].items()}},
                     indent=1))


def verify_store(args: argparse.Namespace) -> None:
    from zoo.tasks.shard_store import ShardStore

    store = ShardStore.open(args.folder)  # a file that does not match is a DataError naming it
    print(f"{args.folder}: {len(store.files())} files match the index; " + "; ".join(
        f"{split} {parts[next(iter(parts))]['documents']:,} documents, "
        f"{sum(part['tokens'] for part in parts.values()):,} ids" for split, parts in store.summary().items()))
