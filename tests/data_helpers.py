"""Builders for the data-fetch tests: OLE/CAB (MSI) files, upstream-layout archives made from
SentEval's task data, and a loopback HTTP server with Range support and scripted failures."""

import http.server
import io
import pickle
import struct
import tarfile
import threading
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path

SECTOR, MINI, CUTOFF = 512, 64, 4096

# Synthetic texts in the shape of the MRPC installer's two files (CRLF, BOM'd header), and what
# SentEval's MRPC recipe makes of them (worked out by hand from tokenizer.perl's rules).
TRAIN_KEY, TEST_KEY = "_2DEC3DBE877E4DB192D17C0256E90F1D", "_D7B391F9EAFF4B1B8BCE8F21B20B1B61"
SYNTHETIC_TRAIN = (
    "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
    "1\t1001\t1002\tThe company's shares rose 5 percent, to $12.50, on Jan. 8.\t"
    "Shares of the company climbed 5% to $12.50 on Jan. 8, traders said.\r\n"
    '0\t1003\t1004\tHe said "it isn\'t over" at Acme Corp.\t'
    "The 1990's were good for U.S. firms, analysts noted...\r\n"
).encode("utf-8")
SYNTHETIC_TEST = (
    "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
    "1\t2001\t2002\tNo. 2 maker (ABC) fell.\tMr. Smith didn't comment.\r\n"
).encode("utf-8")
EXPECTED_TRAIN = (
    "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    "1\t1001\t1002\tThe company 's shares rose 5 percent , to $ 12.50 , on Jan. 8 .\t"
    "Shares of the company climbed 5 % to $ 12.50 on Jan. 8 , traders said .\n"
    '0\t1003\t1004\tHe said " it isn \'t over " at Acme Corp.\t'
    "The 1990 's were good for U.S. firms , analysts noted ...\n"
).encode("utf-8")
EXPECTED_TEST = (
    "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    "1\t2001\t2002\tNo. 2 maker ( ABC ) fell .\tMr. Smith didn 't comment .\n"
).encode("utf-8")

END, FREE, FATSECT, NOSTREAM = 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFD, 0xFFFFFFFF


# --- cabinet and compound-file writers -------------------------------------------------------------


def _xor_checksum(data, seed=0):
    value = seed
    full = len(data) - len(data) % 4
    for i in range(0, full, 4):
        value ^= data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
    rest = 0
    for byte in data[full:]:
        rest = rest << 8 | byte
    return value ^ rest


def build_cab(members, compress=True, block=32768, checksums=True):
    """A single-folder cabinet holding members {name: bytes} (MSZIP or stored)."""
    stream = b"".join(members.values())
    blocks, history = [], b""
    for start in range(0, max(len(stream), 1), block):
        chunk = stream[start : start + block]
        if compress:
            packer = (
                zlib.compressobj(9, zlib.DEFLATED, -15, zdict=history)
                if history
                else zlib.compressobj(9, zlib.DEFLATED, -15)
            )
            body = b"CK" + packer.compress(chunk) + packer.flush()
        else:
            body = chunk
        history = (history + chunk)[-32768:]
        sizes = struct.pack("<HH", len(body), len(chunk))
        csum = _xor_checksum(sizes, _xor_checksum(body)) if checksums else 0
        blocks.append(struct.pack("<I", csum) + sizes + body)
    entries, offset = b"", 0
    for name, data in members.items():
        entries += struct.pack("<IIHHHH", len(data), offset, 0, 0x5A21, 0x6000, 0x20) + name.encode() + b"\0"
        offset += len(data)
    data_start = 36 + 8 + len(entries)
    body = b"".join(blocks)
    header = struct.pack(
        "<4sIIIIIBBHHHHH", b"MSCF", 0, data_start + len(body), 0, 44, 0, 3, 1, 1, len(members), 0, 0, 0
    )
    folder = struct.pack("<IHH", data_start, len(blocks), 1 if compress else 0)
    return header + folder + entries + body


def build_ole(streams):
    """An OLE compound file (v3, 512-byte sectors) holding streams {name: bytes} at its root;
    streams under 4096 bytes go to the mini stream, as the format requires."""
    sectors, fat = [], []

    def allocate(data):
        if not data:
            return END
        first = len(sectors)
        count = (len(data) + SECTOR - 1) // SECTOR
        for i in range(count):
            sectors.append(data[i * SECTOR : (i + 1) * SECTOR].ljust(SECTOR, b"\0"))
            fat.append(first + i + 1 if i < count - 1 else END)
        return first

    mini, minifat, starts = b"", [], {}
    for name, data in streams.items():
        if len(data) < CUTOFF:
            first = len(mini) // MINI
            count = (len(data) + MINI - 1) // MINI
            mini += data.ljust(count * MINI, b"\0")
            minifat += [first + i + 1 if i < count - 1 else END for i in range(count)]
            starts[name] = first if data else END
        else:
            starts[name] = allocate(data)
    mini_start = allocate(mini)
    minifat_bytes = struct.pack(f"<{len(minifat)}I", *minifat) if minifat else b""
    minifat_start = allocate(minifat_bytes)
    n_minifat = (len(minifat_bytes) + SECTOR - 1) // SECTOR

    def entry(name, kind, start, size, child=NOSTREAM, right=NOSTREAM):
        raw = name.encode("utf-16-le") + b"\0\0"
        return (
            raw.ljust(64, b"\0")
            + struct.pack("<HBBIII", len(raw), kind, 1, NOSTREAM, right, child)
            + b"\0" * 16
            + struct.pack("<I", 0)
            + b"\0" * 16
            + struct.pack("<IQ", start, size)
        )

    names = list(streams)
    directory = entry("Root Entry", 5, mini_start, len(mini), child=1 if names else NOSTREAM)
    for i, name in enumerate(names, 1):
        directory += entry(name, 2, starts[name], len(streams[name]), right=i + 1 if i < len(names) else NOSTREAM)
    directory_start = allocate(directory.ljust((len(directory) + SECTOR - 1) // SECTOR * SECTOR, b"\0"))
    n_fat = 1
    while n_fat * (SECTOR // 4) < len(sectors) + n_fat:
        n_fat += 1
    fat_first = len(sectors)
    fat += [FATSECT] * n_fat
    fat += [FREE] * (n_fat * (SECTOR // 4) - len(fat))
    fat_bytes = struct.pack(f"<{len(fat)}I", *fat)
    for i in range(n_fat):
        sectors.append(fat_bytes[i * SECTOR : (i + 1) * SECTOR])
    difat = [fat_first + i for i in range(n_fat)] + [FREE] * (109 - n_fat)
    header = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
        + b"\0" * 16
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
        + b"\0" * 6
        + struct.pack(
            "<IIIIIIIII", 0, n_fat, directory_start, 0, CUTOFF, minifat_start if n_minifat else END, n_minifat, END, 0
        )
        + struct.pack("<109I", *difat)
    )
    assert len(header) == 512
    return header + b"".join(sectors)


def build_msi(members, compress=True):
    """A Windows-Installer-shaped compound file: a few small table streams and a cabinet stream."""
    return build_ole(
        {
            "\x05SummaryInformation": b"\x00" * 200,
            "\u4840\u3f3f\u4577\u446c\u3b6a\u45e4\u4824": b"\x01\x00" * 30,
            "Data1.cab": build_cab(members, compress=compress),
        }
    )


# --- upstream-layout archives from SentEval's task data ----------------------------------------


def zip_bytes(members):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def targz_bytes(members):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def snli_raw(data_dir, split, extra_lines=()):
    """snli_1.0_SPLIT.txt rebuilt from SentEval's s1/s2/labels: 14 columns, a header, plus pairs
    without a gold label ("-") that SentEval drops."""
    folder = Path(data_dir) / "downstream" / "SNLI"
    s1 = (folder / f"s1.{split}").read_bytes().split(b"\n")[:-1]
    s2 = (folder / f"s2.{split}").read_bytes().split(b"\n")[:-1]
    labels = (folder / f"labels.{split}").read_bytes().split(b"\n")[:-1]
    header = (
        b"gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
        b"sentence2_parse\tsentence1\tsentence2\tcaptionID\tpairID\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5"
    )
    rows = [header]
    for i, (a, b, label) in enumerate(zip(s1, s2, labels)):
        if i % 1000 == 7:
            rows.append(
                b"-\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tA dropped pair .\tIt has no gold label .\t1\t1\t"
                b"neutral\tentailment\tcontradiction\tneutral\tentailment"
            )
        rows.append(
            b"\t".join(
                [
                    label,
                    b"( x )",
                    b"( y )",
                    b"(ROOT x)",
                    b"(ROOT y)",
                    a,
                    b,
                    b"c",
                    b"p",
                    label,
                    label,
                    label,
                    label,
                    label,
                ]
            )
        )
    rows += list(extra_lines)
    return b"\n".join(rows) + b"\n"


def coco_pickle(split, images=3):
    """A small pickle in the shape of SentEval's COCO files (plain lists instead of numpy arrays)."""
    captions = {i: {"cleaned_caption": f"a {split} picture number {i}"} for i in range(images * 5)}
    return pickle.dumps(
        {
            "features": [[float(i), 1.0, 0.5, 0.25] for i in range(images)],
            "image_to_caption_ids": [list(range(5 * i, 5 * i + 5)) for i in range(images)],
            "captions": captions,
        },
        protocol=2,
    )


def build_mirror(data_dir, folder):
    """Write, under folder, the upstream files of the data sets the test data can rebuild exactly:
    CR, MR, MPQA, SUBJ, SST2, SST5, TREC, STSBenchmark (from the raw STS Benchmark), SNLI dev/test
    (plus a small train split), and small stand-ins for COCO and one probing task."""
    data_dir, folder = Path(data_dir), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    d = data_dir / "downstream"
    subj_objective = (d / "SUBJ/subj.objective").read_bytes().replace(b"it' 's", b"it''s")
    (folder / "datasmall_NB_ACL12.zip").write_bytes(
        zip_bytes(
            {
                "data/customerr/custrev.pos": (d / "CR/custrev.pos").read_bytes(),
                "data/customerr/custrev.neg": (d / "CR/custrev.neg").read_bytes(),
                "data/rt10662/rt-polarity.pos": (d / "MR/rt-polarity.pos").read_bytes(),
                "data/rt10662/rt-polarity.neg": (d / "MR/rt-polarity.neg").read_bytes(),
                "data/mpqa/mpqa.pos": (d / "MPQA/mpqa.pos").read_bytes(),
                "data/mpqa/mpqa.neg": (d / "MPQA/mpqa.neg").read_bytes(),
                "data/subj/subj.objective": subj_objective,
                "data/subj/subj.subjective": (d / "SUBJ/subj.subjective").read_bytes(),
            }
        )
    )
    for split in ("train", "dev", "test"):
        (folder / f"sentiment-{split}").write_bytes((d / f"SST/binary/sentiment-{split}").read_bytes())
        (folder / f"stsa.fine.{split}").write_bytes((d / f"SST/fine/sentiment-{split}").read_bytes())
    for name in ("train_5500.label", "TREC_10.label"):
        (folder / name).write_bytes((d / f"TREC/{name}").read_bytes())
    raw = data_dir / "raw" / "STSBenchmark"
    (folder / "Stsbenchmark.tar.gz").write_bytes(
        targz_bytes({f"stsbenchmark/{p.name}": p.read_bytes() for p in sorted(raw.iterdir()) if p.is_file()})
    )
    train_lines = [
        b'neutral\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tA man said "hello"...\tHe can\'t stop.\t'
        b"c\tp\tneutral\tneutral\tneutral\tneutral\tneutral"
    ]
    (folder / "snli_1.0.zip").write_bytes(
        zip_bytes(
            {
                "snli_1.0/snli_1.0_dev.txt": snli_raw(data_dir, "dev"),
                "snli_1.0/snli_1.0_test.txt": snli_raw(data_dir, "test"),
                "snli_1.0/snli_1.0_train.txt": b"\n".join(snli_raw(data_dir, "dev").split(b"\n")[:6] + train_lines)
                + b"\n",
                "__MACOSX/snli_1.0/._snli_1.0_dev.txt": b"junk",
            }
        )
    )
    for split in ("train", "valid", "test"):
        (folder / f"{split}.pkl").write_bytes(coco_pickle(split))
    (folder / "past_present.txt").write_bytes(
        b"tr\tPRES\tshe walks home .\ntr\tPAST\tshe walked .\nva\tPAST\the walked .\nte\tPAST\tit rained .\n"
    )
    return folder


# --- a loopback HTTP server ------------------------------------------------------------------------


class MirrorServer:
    """Serves a folder on 127.0.0.1 with HTTP Range support. `cut[name] = n` makes the next
    request for name send the full Content-Length but only n bytes, then close (an interrupted
    download); `requests` records (path, Range header) of every request."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.cut = {}
        self.requests = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                server.requests.append((name, self.headers.get("Range")))
                path = server.folder / name
                if "/" in name or not path.is_file():
                    self.send_error(404, "Not Found")
                    return
                data = path.read_bytes()
                start = 0
                if self.headers.get("Range", "").startswith("bytes="):
                    start = int(self.headers["Range"][6:].split("-")[0])
                    if start >= len(data):
                        self.send_error(416, "Range Not Satisfiable")
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                limit = server.cut.pop(name, None)
                self.wfile.write(body if limit is None else body[:limit])
                if limit is not None:
                    self.wfile.flush()
                    self.close_connection = True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @contextmanager
    def running(self):
        thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()
            thread.join(timeout=5)
