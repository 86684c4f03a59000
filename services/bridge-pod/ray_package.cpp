#include "services/bridge-pod/ray_package.hpp"

#include <zip.h>

#include <memory>

#include "libcore/net/sigv4.hpp"

namespace kc::bridge::pod {

namespace {

// 1980-01-02 00:00 UTC: inside the DOS time range whatever the time zone.
constexpr time_t kFixedMtime = 315619200;

Error zipError(const std::string& what, zip_error_t* e) {
  return makeError(errc::kInternal,
                   "building the Ray package: " + what + ": " + zip_error_strerror(e));
}

}  // namespace

Result<std::string> rayZipPackage(const std::vector<StagedFile>& files) {
  zip_error_t error;
  zip_error_init(&error);
  std::unique_ptr<zip_source_t, decltype(&zip_source_free)> buffer(
      zip_source_buffer_create(nullptr, 0, 0, &error), &zip_source_free);
  if (!buffer) {
    auto e = zipError("buffer", &error);
    zip_error_fini(&error);
    return e;
  }
  zip_t* archive = zip_open_from_source(buffer.get(), ZIP_TRUNCATE, &error);
  if (archive == nullptr) {
    auto e = zipError("open", &error);
    zip_error_fini(&error);
    return e;
  }
  zip_error_fini(&error);
  zip_source_keep(buffer.get());  // the bytes are read back after zip_close
  for (const StagedFile& f : files) {
    zip_source_t* data = zip_source_buffer(archive, f.bytes.data(), f.bytes.size(), 0);
    const zip_int64_t index =
        data == nullptr ? -1 : zip_file_add(archive, f.name.c_str(), data, ZIP_FL_ENC_GUESS);
    if (index < 0) {
      if (data != nullptr) {
        zip_source_free(data);
      }
      auto e = zipError("adding " + f.name, zip_get_error(archive));
      zip_discard(archive);
      return e;
    }
    if (zip_file_set_mtime(archive, static_cast<zip_uint64_t>(index), kFixedMtime, 0) != 0 ||
        zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), ZIP_CM_DEFLATE, 9) !=
            0) {
      auto e = zipError("entry " + f.name, zip_get_error(archive));
      zip_discard(archive);
      return e;
    }
  }
  if (zip_close(archive) != 0) {
    auto e = zipError("close", zip_get_error(archive));
    zip_discard(archive);
    return e;
  }
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_source_stat(buffer.get(), &st) != 0 || (st.valid & ZIP_STAT_SIZE) == 0 ||
      zip_source_open(buffer.get()) != 0) {
    return zipError("reading the archive back", zip_source_error(buffer.get()));
  }
  std::string out(st.size, '\0');
  const zip_int64_t n = zip_source_read(buffer.get(), out.data(), out.size());
  zip_source_close(buffer.get());
  if (n < 0 || static_cast<zip_uint64_t>(n) != st.size) {
    return zipError("reading the archive back", zip_source_error(buffer.get()));
  }
  return out;
}

std::string rayPackageUri(const std::string& zip) {
  return "gcs://_ray_pkg_" + kc::sigv4::sha256Hex(zip).substr(0, 32) + ".zip";
}

}  // namespace kc::bridge::pod
