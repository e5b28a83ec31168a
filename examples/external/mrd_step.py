#!/usr/bin/env python3
"""An external step for reconserver, in the Python standard library only.

It speaks the MRD (Gadgetron/ISMRMRD) streaming protocol with its own
minimal reader and writer, and does, depending on what it receives:

- acquisitions: a Cartesian 2D reconstruction per slice (centered inverse
  FFT, readout oversampling cropped, root sum of squares over the coils),
  float magnitude images back, series 1;
- images (float): the config name says what: "smooth" a 3x3 mean filter,
  anything else ("passthrough") sends them back untouched.

Two ways to run it:
  mrd_step.py                     started by reconserver (external gadget,
                                  `execute`): the connection is descriptor
                                  $MR_EXTERNAL_FD
  mrd_step.py --listen HOST:PORT  an MRD server (external gadget, `connect`);
                                  prints "listening on PORT" (port 0 picks one)
"""
import cmath
import math
import os
import socket
import struct
import sys
import threading
import xml.etree.ElementTree as ET

CONFIG_FILE, CONFIG_SCRIPT, HEADER, CLOSE, TEXT = 1, 2, 3, 4, 5
ACQUISITION, IMAGE, WAVEFORM = 1008, 1022, 1026
ACQ_HEAD, IMAGE_HEAD, WAVEFORM_HEAD = 340, 198, 40
PIXEL_BYTES = {1: 2, 2: 2, 3: 4, 4: 4, 5: 4, 6: 8, 7: 8, 8: 16}
FLOAT, IMTYPE_MAGNITUDE = 5, 1
# ISMRMRD acquisition flag bits (1-based) this step looks at.
LAST_IN_SLICE, NOISE, NAVIGATION, PHASECORR = 8, 19, 23, 22


def log(*what):
    print(*what, file=sys.stderr, flush=True)


class Wire:
    """Reads and writes MRD messages on a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.rfile = sock.makefile("rb", buffering=1 << 16)

    def read(self, n):
        data = self.rfile.read(n)
        if len(data) != n:
            raise EOFError("connection closed mid-message")
        return data

    def u16(self):
        return struct.unpack("<H", self.read(2))[0]

    def u32(self):
        return struct.unpack("<I", self.read(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.read(8))[0]

    def next(self):
        """(id, payload): payload is a str, or (head bytes, rest...)."""
        mid = self.u16()
        if mid == CONFIG_FILE:
            return mid, self.read(1024).split(b"\0", 1)[0].decode()
        if mid in (CONFIG_SCRIPT, HEADER, TEXT):
            return mid, self.read(self.u32()).decode(errors="replace")
        if mid == CLOSE:
            return mid, None
        if mid == ACQUISITION:
            head = self.read(ACQ_HEAD)
            samples, _, channels = struct.unpack_from("<3H", head, 34)
            traj_dims = struct.unpack_from("<H", head, 176)[0]
            traj = self.read(4 * samples * traj_dims)
            data = self.read(8 * samples * channels)
            return mid, (head, traj, data)
        if mid == IMAGE:
            head = self.read(IMAGE_HEAD)
            attributes = self.read(self.u64())
            x, y, z = struct.unpack_from("<3H", head, 16)
            channels = struct.unpack_from("<H", head, 34)[0]
            dtype = struct.unpack_from("<H", head, 2)[0]
            if dtype not in PIXEL_BYTES:
                raise ValueError("image of unknown data type %d" % dtype)
            data = self.read(x * y * z * channels * PIXEL_BYTES[dtype])
            return mid, (head, attributes, data)
        if mid == WAVEFORM:
            head = self.read(WAVEFORM_HEAD)
            samples, channels = struct.unpack_from("<2H", head, 28)
            return mid, (head, self.read(4 * samples * channels))
        raise ValueError("unknown message id %d" % mid)

    def send(self, *parts):
        self.sock.sendall(b"".join(parts))

    def send_close(self):
        self.send(struct.pack("<H", CLOSE))

    def send_image(self, head, attributes, data):
        self.send(struct.pack("<H", IMAGE), head, struct.pack("<Q", len(attributes)),
                  attributes, data)


def fft(x, inverse):
    """Unitary-free radix-2 FFT (a plain DFT for other lengths)."""
    n = len(x)
    if n <= 1:
        return list(x)
    sign = 1 if inverse else -1
    if n % 2:
        return [sum(x[t] * cmath.exp(sign * 2j * math.pi * k * t / n) for t in range(n))
                for k in range(n)]
    even, odd = fft(x[0::2], inverse), fft(x[1::2], inverse)
    out = [0j] * n
    for k in range(n // 2):
        w = cmath.exp(sign * 2j * math.pi * k / n) * odd[k]
        out[k], out[k + n // 2] = even[k] + w, even[k] - w
    return out


def centered_ifft(x):
    """fftshift(ifft(ifftshift(x))), unitary (1/sqrt(n))."""
    n = len(x)
    shifted = x[n - n // 2:] + x[:n - n // 2] if n % 2 else x[n // 2:] + x[:n // 2]
    y = fft(shifted, True)
    y = y[(n + 1) // 2:] + y[:(n + 1) // 2]
    s = 1 / math.sqrt(n)
    return [v * s for v in y]


class Recon:
    """Cartesian 2D: gathers a slice's lines, reconstructs at its last."""

    def __init__(self, header_xml):
        root = ET.fromstring(header_xml)
        for e in root.iter():  # with or without the ISMRMRD namespace
            e.tag = e.tag.rpartition("}")[2]
        enc = root.find("encoding")
        self.ny = int(enc.find("encodedSpace/matrixSize/y").text)
        self.rx = int(enc.find("reconSpace/matrixSize/x").text)
        fov = enc.find("reconSpace/fieldOfView_mm")
        self.fov = [float(fov.find(a).text) for a in "xyz"]
        self.lines = {}
        self.index = 0

    def add(self, wire, head, data):
        flags = struct.unpack_from("<Q", head, 2)[0]
        if flags & ((1 << (NOISE - 1)) | (1 << (NAVIGATION - 1)) | (1 << (PHASECORR - 1))):
            return
        samples, _, channels = struct.unpack_from("<3H", head, 34)
        e1, _, _, slc = struct.unpack_from("<4H", head, 242)
        floats = struct.unpack("<%df" % (2 * samples * channels), data)
        coils = [[complex(floats[2 * (c * samples + s)], floats[2 * (c * samples + s) + 1])
                  for s in range(samples)] for c in range(channels)]
        self.lines.setdefault(slc, {})[e1] = (head, coils)
        if flags & (1 << (LAST_IN_SLICE - 1)):
            self.finish(wire, slc)

    def finish(self, wire, slc):
        lines = self.lines.pop(slc)
        head, coils = lines[max(lines)]
        nx, nch, ny = len(coils[0]), len(coils), self.ny
        rx = min(self.rx, nx)
        x0 = (nx - rx) // 2
        power = [[0.0] * rx for _ in range(ny)]
        for c in range(nch):
            # Readout first (each line), cropped, then phase encoding.
            rows = [[0j] * rx for _ in range(ny)]
            for e1, (_, line) in lines.items():
                rows[e1] = centered_ifft(line[c])[x0:x0 + rx]
            for x in range(rx):
                col = centered_ifft([rows[y][x] for y in range(ny)])
                for y in range(ny):
                    power[y][x] += abs(col[y]) ** 2
        pixels = [math.sqrt(p) for row in power for p in row]
        wire.send_image(self.image_head(head, rx, ny, slc), b"",
                        struct.pack("<%df" % len(pixels), *pixels))

    def image_head(self, acq, rx, ny, slc):
        h = bytearray(IMAGE_HEAD)
        struct.pack_into("<HH", h, 0, 1, FLOAT)
        struct.pack_into("<I", h, 12, struct.unpack_from("<I", acq, 10)[0])
        struct.pack_into("<3H", h, 16, rx, ny, 1)
        struct.pack_into("<3f", h, 22, *self.fov)
        struct.pack_into("<H", h, 34, 1)
        h[36:96] = acq[182:242]  # position, directions, table position
        struct.pack_into("<6H", h, 96, *struct.unpack_from("<6H", acq, 246))
        struct.pack_into("<I", h, 108, struct.unpack_from("<I", acq, 18)[0])
        h[112:124] = acq[22:34]
        struct.pack_into("<3H", h, 124, IMTYPE_MAGNITUDE, self.index, 1)
        self.index += 1
        return bytes(h)


def smooth(head, data):
    """3x3 mean of each float plane (neighbours inside the image only)."""
    x, y, z = struct.unpack_from("<3H", head, 16)
    planes = z * struct.unpack_from("<H", head, 34)[0]
    v = struct.unpack("<%df" % (x * y * planes), data)
    out = []
    for p in range(planes):
        base = p * x * y
        for j in range(y):
            for i in range(x):
                total, count = 0.0, 0
                for jj in range(max(0, j - 1), min(y, j + 2)):
                    for ii in range(max(0, i - 1), min(x, i + 2)):
                        total += v[base + jj * x + ii]
                        count += 1
                out.append(total / count)
    return struct.pack("<%df" % len(out), *out)


def serve(sock):
    """One session: config, header, data, CLOSE; answers, then CLOSE."""
    wire = Wire(sock)
    config, recon = "default", None
    try:
        while True:
            mid, payload = wire.next()
            if mid == CONFIG_FILE:
                config = payload
            elif mid == HEADER:
                recon = Recon(payload)
            elif mid == ACQUISITION:
                if recon is None:
                    raise ValueError("acquisition before the header")
                recon.add(wire, payload[0], payload[2])
            elif mid == IMAGE:
                head, attributes, data = payload
                dtype = struct.unpack_from("<H", head, 2)[0]
                if config == "smooth" and dtype == FLOAT:
                    data = smooth(head, data)
                wire.send_image(head, attributes, data)
            elif mid == CLOSE:
                wire.send_close()
                return
    except (EOFError, ValueError, OSError) as e:
        log("mrd_step: %s" % e)
    finally:
        sock.close()


def main(argv):
    if len(argv) == 3 and argv[1] == "--listen":
        host, _, port = argv[2].rpartition(":")
        server = socket.create_server((host, int(port)))
        print("listening on %d" % server.getsockname()[1], flush=True)
        while True:
            conn, _ = server.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
    fd = os.environ.get("MR_EXTERNAL_FD")
    if len(argv) != 1 or fd is None:
        log(__doc__)
        return 2
    serve(socket.socket(fileno=int(fd)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
