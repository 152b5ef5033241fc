import * as MP4Box from "mp4box";

/**
 * Minimal, dependency-light checks that generated media are what they claim
 * to be. They read container headers only (no pixel decoding), but they do
 * cross-check the H.264 SPS so a muxer that merely echoes the requested size
 * into the MP4 header cannot hide a wrongly sized bitstream.
 */

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
// Length 0, "IEND", CRC of "IEND": its presence at the very end shows the file was not truncated.
const PNG_IEND = [0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82];

export function probePng(bytes: Uint8Array): { width: number; height: number } {
  if (bytes.length < 8 + 25 + 12 || PNG_SIGNATURE.some((b, i) => bytes[i] !== b)) {
    throw new Error("not a PNG: bad signature or too short");
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const ihdrType = String.fromCharCode(...bytes.subarray(12, 16));
  if (view.getUint32(8) !== 13 || ihdrType !== "IHDR") throw new Error("not a PNG: first chunk is not IHDR");
  if (PNG_IEND.some((b, i) => bytes[bytes.length - 12 + i] !== b)) throw new Error("PNG is truncated: no IEND at the end");
  const width = view.getUint32(16);
  const height = view.getUint32(20);
  if (width === 0 || height === 0) throw new Error(`PNG has an empty size ${width}x${height}`);
  return { width, height };
}

export interface Mp4Probe {
  width: number;
  height: number;
  durationSeconds: number;
  codec: string;
  frames: number;
}

export async function probeMp4(bytes: Uint8Array): Promise<Mp4Probe> {
  const file = MP4Box.createFile();
  let info: MP4Box.Movie | undefined;
  let parseError: string | undefined;
  file.onReady = (movie) => {
    info = movie;
  };
  file.onError = (module, message) => {
    parseError = `${module}: ${message}`;
  };
  // mp4box needs an ArrayBuffer holding exactly the file, tagged with its offset. Not
  // `bytes.slice()`: on a Buffer that is a view, whose .buffer may be a shared pool.
  const copy = new Uint8Array(bytes).buffer;
  try {
    file.appendBuffer(MP4Box.MP4BoxBuffer.fromArrayBuffer(copy, 0));
    file.flush();
  } catch (error) {
    throw new Error(`not an MP4: ${String(error)}`);
  }
  if (parseError) throw new Error(`not an MP4: ${parseError}`);
  if (!info) throw new Error("not an MP4: no complete moov box");
  if (info.videoTracks.length !== 1) throw new Error(`expected one video track, found ${info.videoTracks.length}`);

  const track = info.videoTracks[0]!;
  if (!track.video) throw new Error("video track has no visual sample entry");
  const { width, height } = track.video;
  // avc1 must carry its SPS in the avcC box (avc3 may keep it in-band only).
  if (track.codec.startsWith("avc1")) {
    const entry = file.getTrackById(track.id).mdia.minf.stbl.stsd.entries[0] as { avcC?: { SPS: Array<{ data: Uint8Array }> } };
    const sps = entry.avcC?.SPS[0]?.data;
    if (!sps) throw new Error("avc track without an SPS");
    const coded = spsFrameSize(sps);
    if (coded.width !== width || coded.height !== height) {
      throw new Error(`sample entry says ${width}x${height} but the SPS says ${coded.width}x${coded.height}`);
    }
  }
  if (!(track.timescale > 0)) throw new Error("video track has no timescale");
  // With the moov first, a cut-off file still parses; its sample table then points past the end.
  for (const sample of file.getTrackById(track.id).samples ?? []) {
    if (sample.offset + sample.size > bytes.length) throw new Error("MP4 is truncated: sample data past the end");
  }
  return {
    width,
    height,
    // Fragmented files carry no duration in the moov; the sum of sample durations stands in.
    durationSeconds: (track.duration > 0 ? track.duration : track.samples_duration) / track.timescale,
    codec: track.codec,
    frames: track.nb_samples,
  };
}

class BitReader {
  private bit = 0;
  constructor(private readonly data: Uint8Array) {}

  u(n: number): number {
    let v = 0;
    for (let i = 0; i < n; i++) {
      const byte = this.data[this.bit >> 3];
      if (byte === undefined) throw new Error("SPS is truncated");
      v = v * 2 + ((byte >> (7 - (this.bit & 7))) & 1);
      this.bit++;
    }
    return v;
  }

  ue(): number {
    let zeros = 0;
    while (this.u(1) === 0) {
      if (++zeros > 31) throw new Error("SPS has an invalid Exp-Golomb code");
    }
    return 2 ** zeros - 1 + this.u(zeros);
  }

  se(): number {
    const k = this.ue();
    return k % 2 === 1 ? (k + 1) / 2 : -(k / 2);
  }
}

/** Display size from an H.264 sequence parameter set (ITU-T H.264 §7.3.2.1.1), cropping applied. */
export function spsFrameSize(nal: Uint8Array): { width: number; height: number } {
  // Drop emulation-prevention bytes (00 00 03 → 00 00) before reading bits.
  const rbsp: number[] = [];
  for (let i = 0; i < nal.length; i++) {
    if (i >= 2 && nal[i] === 3 && nal[i - 1] === 0 && nal[i - 2] === 0) continue;
    rbsp.push(nal[i]!);
  }
  const r = new BitReader(Uint8Array.from(rbsp));
  if ((r.u(8) & 0x1f) !== 7) throw new Error("not an SPS NAL unit");
  const profile = r.u(8);
  r.u(16); // constraint flags, level
  r.ue(); // seq_parameter_set_id
  let chromaFormat = 1;
  let separateColourPlanes = 0;
  if ([100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].includes(profile)) {
    chromaFormat = r.ue();
    if (chromaFormat === 3) separateColourPlanes = r.u(1);
    r.ue(); // bit_depth_luma_minus8
    r.ue(); // bit_depth_chroma_minus8
    r.u(1); // qpprime_y_zero_transform_bypass_flag
    if (r.u(1)) {
      for (let i = 0; i < (chromaFormat !== 3 ? 8 : 12); i++) {
        if (!r.u(1)) continue;
        let last = 8;
        let next = 8;
        for (let j = 0; j < (i < 6 ? 16 : 64); j++) {
          if (next !== 0) next = (last + r.se() + 256) % 256;
          last = next === 0 ? last : next;
        }
      }
    }
  }
  r.ue(); // log2_max_frame_num_minus4
  const pocType = r.ue();
  if (pocType === 0) {
    r.ue();
  } else if (pocType === 1) {
    r.u(1);
    r.se();
    r.se();
    const cycle = r.ue();
    for (let i = 0; i < cycle; i++) r.se();
  }
  r.ue(); // max_num_ref_frames
  r.u(1); // gaps_in_frame_num_value_allowed_flag
  const widthMbs = r.ue() + 1;
  const heightMapUnits = r.ue() + 1;
  const frameMbsOnly = r.u(1);
  if (!frameMbsOnly) r.u(1);
  r.u(1); // direct_8x8_inference_flag
  let [left, right, top, bottom] = [0, 0, 0, 0];
  if (r.u(1)) [left, right, top, bottom] = [r.ue(), r.ue(), r.ue(), r.ue()];

  const chromaArrayType = separateColourPlanes ? 0 : chromaFormat;
  const cropX = chromaArrayType === 0 || chromaArrayType === 3 ? 1 : 2;
  const cropY = (chromaArrayType === 1 ? 2 : 1) * (2 - frameMbsOnly);
  return {
    width: widthMbs * 16 - cropX * (left + right),
    height: (2 - frameMbsOnly) * heightMapUnits * 16 - cropY * (top + bottom),
  };
}
