// libjpeg compression into memory (jpeg_mem_dest), with an error manager that longjmps back
// instead of calling exit(), as the decoder's does. Everything with a destructor exists
// before setjmp; the session lives on the heap.
#include "images/JpegEncoder.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include <jpeglib.h>

#include <fmt/format.h>

namespace ringtrain {
namespace {

struct EncodeSession {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  bool created = false;
  ~EncodeSession() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(out);  // jpeg_mem_dest's buffer is malloc'ed and the caller's to free
  }
};

[[noreturn]] void on_encode_error(j_common_ptr cinfo) {
  auto* s = static_cast<EncodeSession*>(cinfo->client_data);
  (*cinfo->err->format_message)(cinfo, s->message);
  std::longjmp(s->jump, 1);
}

}  // namespace

std::vector<std::uint8_t> encode_jpeg(std::span<const std::uint8_t> pixels, int width, int height, int channels,
                                      int quality) {
  if (width < 1 || height < 1 || (channels != 1 && channels != 3) ||
      pixels.size() != static_cast<std::size_t>(width) * height * channels)
    throw std::invalid_argument(fmt::format("encode_jpeg: {} bytes for {}x{}x{}", pixels.size(), width, height, channels));
  if (quality < 1 || quality > 100) throw std::invalid_argument(fmt::format("--quality: expected 1..100, got {}", quality));
  auto s = std::make_unique<EncodeSession>();
  s->cinfo.err = jpeg_std_error(&s->err);
  s->err.error_exit = on_encode_error;
  s->cinfo.client_data = s.get();
  if (setjmp(s->jump) != 0) throw std::runtime_error(fmt::format("JPEG encoding failed: {}", s->message));
  jpeg_create_compress(&s->cinfo);
  s->created = true;
  jpeg_mem_dest(&s->cinfo, &s->out, &s->out_size);
  s->cinfo.image_width = static_cast<JDIMENSION>(width);
  s->cinfo.image_height = static_cast<JDIMENSION>(height);
  s->cinfo.input_components = channels;
  s->cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&s->cinfo);
  jpeg_set_quality(&s->cinfo, quality, TRUE);
  if (channels == 3 && quality >= 90) {
    // Full-resolution chroma at high quality, as PIL's default subsampling does.
    s->cinfo.comp_info[0].h_samp_factor = 1;
    s->cinfo.comp_info[0].v_samp_factor = 1;
  }
  s->cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_compress(&s->cinfo, TRUE);
  const auto stride = static_cast<std::size_t>(width) * channels;
  while (s->cinfo.next_scanline < s->cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels.data() + s->cinfo.next_scanline * stride);
    jpeg_write_scanlines(&s->cinfo, &row, 1);
  }
  jpeg_finish_compress(&s->cinfo);
  return std::vector<std::uint8_t>(s->out, s->out + s->out_size);
}

}  // namespace ringtrain
