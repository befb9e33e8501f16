"""Reading files out of a Windows Installer package (.msi) without cabextract.

An MSI is an OLE compound file (MS-CFB): a small FAT file system whose streams hold the installer's
database tables and one or more cabinet (.cab) archives with the files to install. `read_ole`
lists the streams of a compound file; `read_cab` unpacks a cabinet whose folders are stored or
MSZIP-compressed (MSZIP blocks are raw deflate streams, each using the previous block's output as
its dictionary); `extract_msi` combines both and returns every file of every cabinet in the package,
under the names the cabinet gives them (the MSI File table keys).
"""

import struct
import zlib

from embeval.errors import EmbevalError

OLE_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
CAB_SIGNATURE = b"MSCF"
_FREE, _END_OF_CHAIN = 0xFFFFFFFF, 0xFFFFFFFE
_NO_STREAM = 0xFFFFFFFF
_STORAGE, _STREAM, _ROOT = 1, 2, 5


class ArchiveError(EmbevalError):
    """An archive is not what its format says (truncated, corrupt, or of an unsupported kind)."""


def _u16(data, offset):
    return struct.unpack_from("<H", data, offset)[0]


def _u32(data, offset):
    return struct.unpack_from("<I", data, offset)[0]


def read_ole(data):
    """The streams of an OLE compound file: {path ("Storage/Stream"): bytes}, names as stored."""
    if len(data) < 512 or data[:8] != OLE_SIGNATURE:
        raise ArchiveError("not an OLE compound file (MSI) or truncated")
    sector_size = 1 << _u16(data, 0x1E)
    mini_size = 1 << _u16(data, 0x20)
    if sector_size not in (512, 4096) or mini_size != 64:
        raise ArchiveError("unsupported OLE sector size")
    n_fat, first_dir = _u32(data, 0x2C), _u32(data, 0x30)
    cutoff, first_minifat = _u32(data, 0x38), _u32(data, 0x3C)
    first_difat, n_difat = _u32(data, 0x44), _u32(data, 0x48)
    per_sector = sector_size // 4

    def sector(index):
        start = (index + 1) * sector_size
        if start + sector_size > len(data):
            raise ArchiveError("OLE sector beyond the end of the file (truncated)")
        return data[start : start + sector_size]

    fat_sectors = [s for s in struct.unpack_from("<109I", data, 0x4C) if s != _FREE]
    next_difat = first_difat
    for _ in range(n_difat):
        if next_difat >= _END_OF_CHAIN:
            break
        entries = struct.unpack(f"<{per_sector}I", sector(next_difat))
        fat_sectors += [s for s in entries[:-1] if s != _FREE]
        next_difat = entries[-1]
    fat_sectors = fat_sectors[:n_fat]
    fat = []
    for s in fat_sectors:
        fat.extend(struct.unpack(f"<{per_sector}I", sector(s)))

    def chain(start, table, limit):
        out, current, seen = [], start, set()
        while current < _END_OF_CHAIN:
            if current in seen or current >= len(table) or len(out) > limit:
                raise ArchiveError("OLE sector chain is broken (corrupt file)")
            seen.add(current)
            out.append(current)
            current = table[current]
        return out

    limit = len(data) // sector_size + 1
    directory = b"".join(sector(s) for s in chain(first_dir, fat, limit))
    entries = [directory[i : i + 128] for i in range(0, len(directory) - 127, 128)]
    if not entries or entries[0][66] != _ROOT:
        raise ArchiveError("OLE file has no root directory entry (corrupt file)")

    def regular_stream(start, size):
        content = b"".join(sector(s) for s in chain(start, fat, limit))
        if len(content) < size:
            raise ArchiveError("OLE stream shorter than its recorded size (truncated)")
        return content[:size]

    root = entries[0]
    mini_stream = regular_stream(_u32(root, 116), struct.unpack_from("<Q", root, 120)[0])
    minifat = []
    if first_minifat < _END_OF_CHAIN:
        for s in chain(first_minifat, fat, limit):
            minifat.extend(struct.unpack(f"<{per_sector}I", sector(s)))

    def mini_stream_bytes(start, size):
        blocks = chain(start, minifat, len(mini_stream) // mini_size + 1)
        content = b"".join(mini_stream[b * mini_size : (b + 1) * mini_size] for b in blocks)
        if len(content) < size:
            raise ArchiveError("OLE mini stream shorter than its recorded size (corrupt file)")
        return content[:size]

    streams = {}

    def walk(index, prefix, depth):
        if index == _NO_STREAM or depth > 64:
            return
        if index >= len(entries):
            raise ArchiveError("OLE directory entry out of range (corrupt file)")
        entry = entries[index]
        name_length = min(_u16(entry, 64), 64)
        name = entry[: max(name_length - 2, 0)].decode("utf-16-le", errors="replace")
        kind = entry[66]
        walk(_u32(entry, 68), prefix, depth + 1)
        walk(_u32(entry, 72), prefix, depth + 1)
        if kind == _STREAM:
            start, size = _u32(entry, 116), struct.unpack_from("<Q", entry, 120)[0]
            if sector_size == 512:
                size &= 0xFFFFFFFF
            read = mini_stream_bytes if size < cutoff else regular_stream
            streams[prefix + name] = read(start, size) if size else b""
        elif kind == _STORAGE:
            walk(_u32(entry, 76), f"{prefix}{name}/", depth + 1)

    walk(_u32(root, 76), "", 0)
    return streams


def msi_stream_name(stored):
    """The readable name of an MSI stream (MSI packs two name characters into one code point)."""
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz._"
    out = []
    for ch in stored:
        code = ord(ch)
        if 0x3800 <= code < 0x4800:
            code -= 0x3800
            out.append(alphabet[code & 0x3F] + alphabet[(code >> 6) & 0x3F])
        elif 0x4800 <= code < 0x4840:
            out.append(alphabet[code - 0x4800])
        elif code == 0x4840:
            out.append("!")
        else:
            out.append(ch)
    return "".join(out)


def cab_checksum(data, seed=0):
    """The cabinet format's XOR checksum of a data block (MS-CAB CFDATA.csum)."""
    csum = seed
    whole = len(data) // 4 * 4
    for (word,) in struct.iter_unpack("<I", data[:whole]):
        csum ^= word
    tail = data[whole:]
    value = 0
    for byte in tail:
        value = (value << 8) | byte
    return csum ^ value


def read_cab(data):
    """The files of a cabinet: {name: bytes}. Stored and MSZIP folders; checksums are verified."""
    if len(data) < 36 or data[:4] != CAB_SIGNATURE:
        raise ArchiveError("not a cabinet (.cab) or truncated")
    cab_size, first_file = _u32(data, 8), _u32(data, 16)
    n_folders, n_files, flags = _u16(data, 26), _u16(data, 28), _u16(data, 30)
    if cab_size > len(data):
        raise ArchiveError("cabinet shorter than its header says (truncated)")
    offset = 36
    folder_reserve = data_reserve = 0
    if flags & 0x0004:
        header_reserve = _u16(data, offset)
        folder_reserve, data_reserve = data[offset + 2], data[offset + 3]
        offset += 4 + header_reserve
    if flags & 0x0003:
        raise ArchiveError("multi-part cabinets are not supported")
    folders = []
    for _ in range(n_folders):
        start, n_blocks, compression = struct.unpack_from("<IHH", data, offset)
        folders.append(_read_folder(data, start, n_blocks, compression & 0x000F, data_reserve))
        offset += 8 + folder_reserve
    files, offset = {}, first_file
    for _ in range(n_files):
        size, start, folder = struct.unpack_from("<IIH", data, offset)
        end = data.index(b"\0", offset + 16)
        name = data[offset + 16 : end].decode("utf-8" if _u16(data, offset + 14) & 0x80 else "latin-1")
        offset = end + 1
        if folder >= len(folders) or start + size > len(folders[folder]):
            raise ArchiveError(f"cabinet file {name} lies outside its folder (corrupt cabinet)")
        files[name] = folders[folder][start : start + size]
    return files


def _read_folder(data, offset, n_blocks, compression, reserve):
    if compression not in (0, 1):
        kind = {2: "Quantum", 3: "LZX"}.get(compression, f"type {compression}")
        raise ArchiveError(f"cabinet uses {kind} compression, which embeval cannot unpack")
    out = bytearray()
    for _block in range(n_blocks):
        if offset + 8 > len(data):
            raise ArchiveError("cabinet data block beyond the end (truncated)")
        csum, packed, unpacked = struct.unpack_from("<IHH", data, offset)
        body = data[offset + 8 + reserve : offset + 8 + reserve + packed]
        if len(body) < packed:
            raise ArchiveError("cabinet data block cut short (truncated)")
        if csum and cab_checksum(data[offset + 4 : offset + 8], cab_checksum(body)) != csum:
            raise ArchiveError("cabinet data block fails its checksum (corrupt cabinet)")
        offset += 8 + reserve + packed
        block = _inflate_mszip(body, bytes(out[-32768:])) if compression == 1 else body
        if len(block) != unpacked:
            raise ArchiveError("cabinet data block unpacks to the wrong size (corrupt cabinet)")
        out += block
    return bytes(out)


def _inflate_mszip(block, history):
    if block[:2] != b"CK":
        raise ArchiveError("cabinet MSZIP block without its signature (corrupt cabinet)")
    try:
        inflater = zlib.decompressobj(-15, zdict=history) if history else zlib.decompressobj(-15)
        return inflater.decompress(block[2:]) + inflater.flush()
    except zlib.error as err:
        raise ArchiveError(f"cabinet MSZIP block does not inflate ({err}; corrupt cabinet)")


def extract_msi(data):
    """Every file of every cabinet stored in an MSI: {cabinet file name: bytes}."""
    files = {}
    cabinets = [s for s in read_ole(data).values() if s[:4] == CAB_SIGNATURE]
    if not cabinets:
        raise ArchiveError("the installer holds no cabinet stream")
    for cabinet in cabinets:
        files.update(read_cab(cabinet))
    return files
