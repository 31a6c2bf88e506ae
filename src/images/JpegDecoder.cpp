// libjpeg with an error manager that longjmps back to the decode call instead of calling
// exit() (libjpeg's default error_exit). The longjmp target is set before any libjpeg call
// and every C++ object of the frame that can be jumped over is created before setjmp, so
// no destructor is skipped ([csetjmp.syn]); the session itself lives on the heap.
#include "images/JpegDecoder.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <memory>
#include <stdexcept>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <jerror.h>

#include <fmt/format.h>

#include "images/ImageDecoder.h"

namespace ringtrain {
namespace {

struct JpegSession {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  bool created = false;
  ~JpegSession() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

JpegSession* session_of(j_common_ptr cinfo) { return static_cast<JpegSession*>(cinfo->client_data); }

[[noreturn]] void on_error_exit(j_common_ptr cinfo) {
  JpegSession* s = session_of(cinfo);
  (*cinfo->err->format_message)(cinfo, s->message);
  std::longjmp(s->jump, 1);
}

// Level -1 is a warning: libjpeg goes on with made-up data (a truncated file decodes as
// gray), which would train on garbage. Extraneous bytes between markers are harmless and
// common in cameras' files, so only they pass.
void on_emit_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code != JWRN_EXTRANEOUS_DATA) on_error_exit(cinfo);
}

// Sets up the error manager and the source; the caller has called setjmp on s.jump.
void open_session(JpegSession& s, std::span<const std::uint8_t> bytes) {
  s.cinfo.err = jpeg_std_error(&s.err);
  s.err.error_exit = on_error_exit;
  s.err.emit_message = on_emit_message;
  s.cinfo.client_data = &s;
  jpeg_create_decompress(&s.cinfo);
  s.created = true;
  jpeg_mem_src(&s.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&s.cinfo, TRUE);
}

bool is_cmyk(J_COLOR_SPACE space) { return space == JCS_CMYK || space == JCS_YCCK; }

// CMYK (as libjpeg outputs it) -> RGB or luma. Adobe's files store CMYK inverted, which is
// what libjpeg hands back for them: R = C * K / 255 there, (255 - C)(255 - K) / 255 otherwise.
void cmyk_to_output(const std::uint8_t* cmyk, std::uint8_t* dst, std::size_t pixels, int channels, bool inverted) {
  for (std::size_t p = 0; p < pixels; ++p, cmyk += 4) {
    unsigned rgb[3];
    const unsigned k = inverted ? cmyk[3] : 255u - cmyk[3];
    for (int c = 0; c < 3; ++c) {
      const unsigned v = inverted ? cmyk[c] : 255u - cmyk[c];
      rgb[c] = (v * k + 127u) / 255u;
    }
    if (channels == 3) {
      for (int c = 0; c < 3; ++c) *dst++ = static_cast<std::uint8_t>(rgb[c]);
    } else {
      *dst++ = rgb_to_luma(rgb[0], rgb[1], rgb[2]);
    }
  }
}

// The decoded rows and columns [x0, x1) x [y0, y1) of a full_w x full_h decode that cover
// the request's region and margin.
struct Window {
  int x0, x1, y0, y1;
};

Window region_window(const DecodeRequest& r, int source_w, int source_h, int full_w, int full_h) {
  if (r.region_width <= 0 || r.region_height <= 0) return {0, full_w, 0, full_h};
  const double sx = static_cast<double>(full_w) / source_w, sy = static_cast<double>(full_h) / source_h;
  Window w;
  w.x0 = std::clamp(static_cast<int>(std::floor(r.region_x * sx)) - r.region_margin, 0, full_w - 1);
  w.x1 = std::clamp(static_cast<int>(std::ceil((r.region_x + r.region_width) * sx)) + r.region_margin, w.x0 + 1, full_w);
  w.y0 = std::clamp(static_cast<int>(std::floor(r.region_y * sy)) - r.region_margin, 0, full_h - 1);
  w.y1 = std::clamp(static_cast<int>(std::ceil((r.region_y + r.region_height) * sy)) + r.region_margin, w.y0 + 1, full_h);
  return w;
}

std::string failure(const std::string& path, const char* message) {
  return fmt::format("{}: {}, expected a complete JPEG image", path, message);
}

}  // namespace

// Powers of two only: libjpeg-turbo's 3/8 to 7/8 scales (and the 6/8 to 14/8 its 4:2:0
// chroma then takes) run plain C IDCTs, while 8/8 is SIMD and 1/8 to 4/8 barely compute.
// On 500x375 photos cropped to 224 (where the smallest N/8 was 5/8 to 7/8 for 60% of the
// crops) decoding those at 8/8 saved more in the IDCT than the larger resampling cost: 2.2
// against 2.4 ms of decoding, 0.7 against 0.6 ms of resampling (one thread, loaded machine).
int jpeg_scale_numerator(int width, int height, int min_width, int min_height) {
  if (min_width <= 0 && min_height <= 0) return 8;
  for (int n = 1; n < 8; n *= 2) {
    const long w = (static_cast<long>(width) * n + 7) / 8, h = (static_cast<long>(height) * n + 7) / 8;
    if (w >= min_width && h >= min_height) return n;
  }
  return 8;
}

ImageHeader read_jpeg_header(std::span<const std::uint8_t> bytes, const std::string& path) {
  ImageHeader header;
  auto s = std::make_unique<JpegSession>();
  if (setjmp(s->jump)) throw std::runtime_error(failure(path, s->message));
  open_session(*s, bytes);
  header.format = ImageFormat::kJpeg;
  header.width = static_cast<int>(s->cinfo.image_width);
  header.height = static_cast<int>(s->cinfo.image_height);
  header.gray = s->cinfo.num_components == 1;
  return header;
}

DecodedImage decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request) {
  DecodedImage out;
  decode_jpeg(bytes, path, request, out);
  return out;
}

void decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& path, const DecodeRequest& request,
                 DecodedImage& out) {
  std::vector<std::uint8_t> cmyk, tail;
  auto s = std::make_unique<JpegSession>();
  if (setjmp(s->jump)) throw std::runtime_error(failure(path, s->message));
  open_session(*s, bytes);
  jpeg_decompress_struct& cinfo = s->cinfo;
  check_pixel_limit(cinfo.image_width, cinfo.image_height, request.max_pixels, path);
  const bool cmyk_source = is_cmyk(cinfo.jpeg_color_space);
  cinfo.out_color_space = cmyk_source ? JCS_CMYK : request.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo.scale_num = static_cast<unsigned>(jpeg_scale_numerator(static_cast<int>(cinfo.image_width),
                                                               static_cast<int>(cinfo.image_height),
                                                               request.min_width, request.min_height));
  cinfo.scale_denom = 8;
  // Accurate integer IDCT and smooth upsampling: the defaults, named so a faster choice is
  // a visible decision (the fast IDCT changes pixels, so it would change trained weights).
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&cinfo);
  out.channels = request.channels;
  out.offset_x = out.offset_y = 0;
  out.source_width = static_cast<int>(cinfo.image_width);
  out.source_height = static_cast<int>(cinfo.image_height);
  out.full_width = static_cast<int>(cinfo.output_width);
  out.full_height = static_cast<int>(cinfo.output_height);
  const Window win = region_window(request, out.source_width, out.source_height, out.full_width, out.full_height);
  if (win.x0 > 0 || win.x1 < out.full_width) {
    JDIMENSION x0 = static_cast<JDIMENSION>(win.x0), w = static_cast<JDIMENSION>(win.x1 - win.x0);
    jpeg_crop_scanline(&cinfo, &x0, &w);  // x0 moves left to an iMCU boundary
    out.offset_x = static_cast<int>(x0);
  }
  out.offset_y = win.y0;
  out.width = static_cast<int>(cinfo.output_width);
  out.height = win.y1 - win.y0;
  if (win.y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(win.y0));
  const std::size_t row = static_cast<std::size_t>(cinfo.output_width) * cinfo.output_components;
  std::vector<std::uint8_t>& target = cmyk_source ? cmyk : out.pixels;
  target.resize(row * static_cast<std::size_t>(out.height));
  while (cinfo.output_scanline < static_cast<JDIMENSION>(win.y1)) {
    JSAMPROW rows[1] = {target.data() + row * (cinfo.output_scanline - static_cast<JDIMENSION>(win.y0))};
    jpeg_read_scanlines(&cinfo, rows, 1);
  }
  // The rows below: skipped (entropy-decoded, not converted) but for the last, which is
  // read: a skip that reaches the bottom returns at once without reading the file, and a
  // file damaged down there would pass for whole.
  if (cinfo.output_scanline + 1 < cinfo.output_height)
    jpeg_skip_scanlines(&cinfo, cinfo.output_height - cinfo.output_scanline - 1);
  if (cinfo.output_scanline < cinfo.output_height) {
    tail.resize(row);
    JSAMPROW rows[1] = {tail.data()};
    jpeg_read_scanlines(&cinfo, rows, 1);
  }
  jpeg_finish_decompress(&cinfo);
  if (cmyk_source) {
    out.pixels.resize(static_cast<std::size_t>(out.width) * out.height * out.channels);
    cmyk_to_output(cmyk.data(), out.pixels.data(), static_cast<std::size_t>(out.width) * out.height, out.channels,
                   cinfo.saw_Adobe_marker != 0);
  }
}

}  // namespace ringtrain
