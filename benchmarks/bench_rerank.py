"""Re-ranking measured: what it changes in a collection's answers, and what it costs.

    python benchmarks/bench_rerank.py quality [--workdir /tmp/dmh-bench-engineers] [--data ../shared/data/fashion]
        [--collections bow-dmh,bow-cca-itq,bow-spdh] [--oversample 2,5,10,20] [--n-train N --n-query N]
        [--image-model efficientnet-lite0] [--out rerank_quality.json]
    python benchmarks/bench_rerank.py cost [--items 10000,1000000] [--bits 64] [--queries 200] [--out rerank_cost.json]

**quality** searches collections that ``benchmarks/bench_engineers_path.py`` built (same
``--workdir``, ``--data``, ``--seed`` and bits: it finds them there, with the queries and their
split), through :class:`dmh.app.collection.Collection` as a user does, by Hamming distance alone and
re-ranked with each oversampling factor: precision@10 of the product type, words -> photos and
photo -> captions, and partner recall@10 (each uncaptioned photo's withheld title must find that
very photo), as bench_engineers_path.py defines them. Beside them, why the codes alone miss: for
the partner queries, how many photos share the Hamming distance of the 10th answer, and how often
the photo sought is among them but was ordered out; and how far float16 values agree with
float32 (the share of re-ranked top-10 lists that are the same). :func:`measure` takes any
collection and any labelled queries, for another data set.

**cost** times the search itself on synthetic collections (random 64-bit values and their codes,
sized ``--items``; no photos: the query path after the query's encoding is what it measures):
median wall and CPU milliseconds of ``Collection``'s search step (Hamming index, then the
re-ranking) for k = 10, by Hamming alone and re-ranked (oversample 10), and the bytes per item that
the stored values add in memory.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
K = 10


# ------------------------------------------------------------------------------------------ quality
def _encoded(col, X, modality: str):
    """Codes and real values of featurized queries (those ``Collection`` computes for each), once
    for every setting searched."""
    from dmh.base import sign_codes

    values = col.model.project(X, modality=modality)
    return sign_codes(values), values


def _answers(col, queries, i: int, target: str, k: int = K):
    """The answers of ``col`` to query ``i`` of ``queries`` (featurized queries and their modality),
    as ``search_text``/``search_image`` give them after featurizing the query."""
    X, modality = queries
    return col.search_features(X[i], modality, k, target)


def measure(col_path, *, text_queries, text_labels, image_query_features, image_labels, partner_texts, partner_ids,
            label_of_item, oversamples=(10,)) -> dict:
    """Precision@10 both ways and partner recall@10 of one collection, by Hamming distance alone
    (``"hamming"``) and re-ranked with each oversampling factor (``"rerank x{o}"``).

    ``text_queries`` / ``text_labels``: texts typed as queries for photos and their labels;
    ``image_query_features`` / ``image_labels``: featurized photos (the collection's image
    featurizer) as queries for captions; ``partner_texts`` / ``partner_ids``: texts whose own
    photo (item id) must be found; ``label_of_item``: item id -> label (read only to score).
    """
    from dmh.app.collection import Collection

    col_path = Path(col_path)
    settings = [("hamming", False, 10)] + [(f"rerank x{o}", True, o) for o in oversamples]
    first = Collection(col_path, rerank=False)
    spec = first.model.featurizer_
    Xt = spec.text_features(list(text_queries))
    Xp = spec.text_features(list(partner_texts))
    qt, qp = _encoded(first, Xt, "text"), _encoded(first, Xp, "text")
    out = {}
    for name, on, o in settings:
        col = Collection(col_path, rerank=on, oversample=o, model=first.model)
        if on and not col.reranks:
            out[name] = None  # a collection without stored values
            continue
        p_t = [sum(label_of_item[h.id] == lab for h in _answers(col, (Xt, "text"), i, "images")) / K
               for i, lab in enumerate(text_labels)]
        p_i = [sum(label_of_item[h.id] == lab for h in _answers(col, (image_query_features, "image"), i, "texts"))
               / K for i, lab in enumerate(image_labels)]
        found = [any(h.id == own for h in _answers(col, (Xp, "text"), i, "images"))
                 for i, own in enumerate(partner_ids)]
        out[name] = {"precision@10 text->images": round(float(np.mean(p_t)), 4),
                     "precision@10 image->texts": round(float(np.mean(p_i)), 4),
                     "partner_recall@10": round(float(np.mean(found)), 4)}
    out["ties"] = _ties(col_path, qp[0], partner_ids)
    out["float16_vs_float32"] = _float16_agreement(col_path, qt, qp)
    return out


def _ties(col_path, q, partner_ids) -> dict:
    """For the partner queries: photos at or within the 10th answer's Hamming distance, and where
    the photo sought stands."""
    from dmh.app.collection import Collection
    from dmh.metrics import hamming_distance

    col = Collection(col_path, rerank=False)
    pos, codes = col._codes["images"]
    D = hamming_distance(q, codes)
    d10 = np.sort(D, axis=1)[:, K - 1]
    own = D[np.arange(len(partner_ids)), [pos[int(i)] for i in partner_ids]]
    within = (D <= d10[:, None]).sum(1)
    return {"photos within the 10th answer's distance: median": float(np.median(within)),
            "photos within the 10th answer's distance: mean": round(float(within.mean()), 1),
            "photo sought strictly nearer than the 10th answer": round(float(np.mean(own < d10)), 4),
            "photo sought at the 10th answer's distance (a tie)": round(float(np.mean(own == d10)), 4),
            "distinct photo codes": int(len(np.unique(codes, axis=0))), "photos": int(codes.shape[0])}


def _float16_agreement(col_path, *encoded) -> dict | None:
    """The share of queries whose re-ranked top 10 (oversample 10) is the same list with the
    stored float16 values as with float32 values of the features."""
    from dmh.app.collection import Collection, collection_features
    from dmh.app.rerank import cosine_to, rerank_order

    col = Collection(col_path, rerank=True)
    if not col.reranks:
        return None
    data, fids = collection_features(col_path)
    row = {int(i): r for r, i in enumerate(fids)}
    sorted_ids, stored = col._values["images"]
    exact = col.model.project(data.image[[row[int(i)] for i in sorted_ids]], modality="image").astype(np.float32)
    same = []
    plain = Collection(col_path, rerank=False)
    for codes_all, values_all in encoded:
        for i in range(codes_all.shape[0]):
            values = values_all[i]
            cand = plain._hits(codes_all[i : i + 1], 10 * K, "images")
            ids = np.array([h.id for h in cand])
            rows = np.searchsorted(sorted_ids, ids)
            dist = [h.distance for h in cand]
            a = ids[rerank_order(cosine_to(values, stored[rows]), dist, ids)][:K]
            b = ids[rerank_order(cosine_to(values, exact[rows]), dist, ids)][:K]
            same.append(np.array_equal(a, b))
    return {"same top-10 list": round(float(np.mean(same)), 4), "queries": len(same)}


def quality_main(args) -> dict:
    import bench_engineers_path as eng

    data = Path(args.data)
    products = eng.read_products(data)
    if args.n_train or args.n_query:  # as bench_engineers_path.py samples them (its --quick: 240 and 60)
        products = eng.subsample(products, args.n_train or sum(p["split"] == "train" for p in products),
                                 args.n_query or sum(p["split"] == "query" for p in products), args.seed)
    tag = f"n{sum(p['split'] == 'train' for p in products)}-seed{args.seed}-{args.image_model}-{args.bits}"
    base = Path(args.workdir) / tag
    if not base.is_dir():
        sys.exit(f"{base}: no collections there; build them first with benchmarks/bench_engineers_path.py "
                 f"--workdir {args.workdir}")
    split = eng.make_inputs(products, base / "inputs", args.seed)
    label_of_row = {int(p["row"]): int(p["label"]) for p in products}
    names = [c.strip() for c in args.collections.split(",") if c.strip()]
    qfeat = eng.query_photo_features(base / names[0], split, base / "query_photo_features.npz")
    oversamples = [int(o) for o in args.oversample.split(",")]
    result = {"benchmark": "rerank_quality", "command": "python benchmarks/bench_rerank.py " + " ".join(args.argv),
              "date": datetime.datetime.now().isoformat(timespec="seconds"), "data": str(data), "n_bits": args.bits,
              "collections": {}}
    from dmh.app.collection import Collection

    for name in names:
        col = Collection(base / name, rerank=False)
        by_name = {it["name"]: it["id"] for it in col.items}
        label_of_item = {it["id"]: label_of_row[int(it["name"])] for it in col.items}
        print(f"[quality] {name} ({col.model.method_name})", file=sys.stderr, flush=True)
        result["collections"][name] = {"method": col.model.method_name, **measure(
            base / name, text_queries=[p["text"] for p in split["query"]],
            text_labels=[p["label"] for p in split["query"]], image_query_features=qfeat,
            image_labels=[p["label"] for p in split["query"]],
            partner_texts=[p["text"] for p in split["uncaptioned"]],
            partner_ids=[by_name[p["photo"].stem] for p in split["uncaptioned"]],
            label_of_item=label_of_item, oversamples=oversamples)}
        if args.out:  # after each collection: a long run keeps what it has measured
            from dmh.report import atomic_write_text

            atomic_write_text(Path(args.out), json.dumps(result, indent=1) + "\n")
    return result


def quality_table(result: dict) -> str:
    lines = ["| collection | search | P@10 words → photos | P@10 photo → captions | partner recall@10 |",
             "|---|---|---:|---:|---:|"]
    for name, rec in result["collections"].items():
        for key, row in rec.items():
            if key in ("method", "ties", "float16_vs_float32") or row is None:
                continue
            lines.append(f"| {name} | {key} | {row['precision@10 text->images']:.3f} | "
                         f"{row['precision@10 image->texts']:.3f} | {row['partner_recall@10']:.3f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ cost
def _synthetic_collection(n: int, n_bits: int, seed: int):
    """A :class:`Collection` over ``n`` synthetic items (photos and captions alike: random values
    and their signs), with a numpy-free model stand-in; only the search step is exercised."""
    from dmh.app.collection import Collection
    from dmh.base import sign_codes
    from dmh.code_files import compact_values
    from dmh.index import HammingIndex

    rng = np.random.default_rng(seed)
    col = Collection.__new__(Collection)
    col.items = None
    col._by_id = dict.fromkeys(range(n), {"name": "item", "image": None, "caption": None})
    col.indexes, col._codes, col._values = {}, {}, {}
    ids = np.arange(n, dtype=np.int64)
    for target in ("images",):  # the photos searched; captions would cost the same
        values = np.empty((n, n_bits), np.float16)
        index = HammingIndex(n_bits)
        for s in range(0, n, 100_000):  # in chunks: float64 values of 10^6 items are not needed at once
            v = rng.normal(size=(min(100_000, n - s), n_bits))
            values[s : s + v.shape[0]] = compact_values(v)
            index.add(sign_codes(v), ids[s : s + v.shape[0]])
        col.indexes[target] = index
        col._values[target] = ids, values
    col.reranks, col.oversample = True, 10
    return col


def cost_main(args) -> dict:
    import dmh
    from dmh.base import sign_codes

    dmh.set_threads(1)
    rows = []
    for n in [int(x) for x in args.items.split(",")]:
        t0 = time.perf_counter()
        col = _synthetic_collection(n, args.bits, args.seed)
        made = time.perf_counter() - t0
        rng = np.random.default_rng(args.seed + 1)
        queries = rng.normal(size=(args.queries, args.bits))
        row = {"items": n, "n_bits": args.bits, "k": K, "made_s": round(made, 1),
               "index_backend": col.indexes["images"].backend}
        for name, rerank in (("hamming", False), ("rerank x10", True)):
            wall, cpu = [], []
            col._hits(sign_codes(queries[:1]), K, "images", values=queries[0] if rerank else None)  # warm
            for q in queries:
                codes = sign_codes(q[None, :])
                t0, c0 = time.perf_counter(), time.thread_time()
                col._hits(codes, K, "images", values=q if rerank else None)
                cpu.append(time.thread_time() - c0)
                wall.append(time.perf_counter() - t0)
            row[name] = {"median_ms": round(statistics.median(wall) * 1000, 3),
                         "median_cpu_ms": round(statistics.median(cpu) * 1000, 3),
                         "p95_ms": round(float(np.percentile(wall, 95)) * 1000, 3)}
        sorted_ids, values = col._values["images"]
        index = col.indexes["images"]
        row["bytes_per_item_per_modality"] = {
            "packed codes (index)": index.code_size, "values (float16)": values.nbytes // n,
            "ids of the values": sorted_ids.nbytes // n,
        }
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
        del col
    return {"benchmark": "rerank_cost", "command": "python benchmarks/bench_rerank.py " + " ".join(args.argv),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), "rows": rows}


def cost_table(result: dict) -> str:
    lines = ["| items | search | median ms | median CPU ms | p95 ms | values in memory |",
             "|---:|---|---:|---:|---:|---|"]
    for r in result["rows"]:
        b = r["bytes_per_item_per_modality"]
        for name in ("hamming", "rerank x10"):
            extra = ("-" if name == "hamming" else f"{b['values (float16)']} B/item/modality "
                     f"(+{b['ids of the values']} B of ids; packed codes {b['packed codes (index)']} B)")
            lines.append(f"| {r['items']:,} | {name} | {r[name]['median_ms']:.2f} | {r[name]['median_cpu_ms']:.2f} | "
                         f"{r[name]['p95_ms']:.2f} | {extra} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    q = sub.add_parser("quality", help="answers with and without re-ranking on built collections")
    q.add_argument("--workdir", default="/tmp/dmh-bench-engineers")
    q.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "fashion"))
    q.add_argument("--collections", default="bow-dmh,bow-cca-itq,bow-spdh")
    q.add_argument("--oversample", default="2,5,10,20")
    q.add_argument("--image-model", default="efficientnet-lite0")
    q.add_argument("--bits", type=int, default=64)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--n-train", type=int, default=None, help="as bench_engineers_path.py --n-train")
    q.add_argument("--n-query", type=int, default=None, help="as bench_engineers_path.py --n-query")
    q.add_argument("--out", default=None)
    c = sub.add_parser("cost", help="latency and memory on synthetic collections")
    c.add_argument("--items", default="10000,1000000")
    c.add_argument("--bits", type=int, default=64)
    c.add_argument("--queries", type=int, default=200)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.argv = argv
    started = {"load_average": os.getloadavg()}
    result = quality_main(args) if args.what == "quality" else cost_main(args)
    result["load_average"] = {"start": started["load_average"], "end": os.getloadavg()}
    result["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count()}
    print(quality_table(result) if args.what == "quality" else cost_table(result))
    if args.what == "quality":
        for name, rec in result["collections"].items():
            print(f"{name}: ties {json.dumps(rec['ties'])}; float16 vs float32 {json.dumps(rec['float16_vs_float32'])}")
    if args.out:
        from dmh.report import atomic_write_text

        atomic_write_text(Path(args.out), json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
