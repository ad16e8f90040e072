#include "secret.hpp"

#include <core/error.hpp>
#include <transports/tcp/handshake.hpp>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tuttirun {

namespace {

[[noreturn]] void refuse(const std::filesystem::path& file, const std::string& why) {
    throw tutti::error(tutti::errc::invalid_argument,
                       fmt::format("--secret-file '{}': {}", file.string(), why));
}

// Checks the text is a secret; the error names where it came from, never the text.
std::string checked(std::string text, const std::string& origin) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
        text.pop_back();
    try {
        return tutti::tcp::job_secret::from_hex(text).to_hex();
    } catch (const tutti::error& e) {
        std::string why = e.what();
        if (why.starts_with("tutti: ")) why.erase(0, 7);
        throw tutti::error(tutti::errc::invalid_argument, fmt::format("{}: {}", origin, why));
    }
}

std::optional<std::string> read_secret_file(const std::filesystem::path& file) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) return std::nullopt;
        refuse(file, std::strerror(errno));
    }
    struct stat st {};
    const bool stated = ::fstat(fd, &st) == 0;
    std::string text(128, '\0');
    const ssize_t n = stated ? ::read(fd, text.data(), text.size()) : -1;
    ::close(fd);
    if (!stated || n < 0) refuse(file, std::strerror(errno));
    if ((st.st_mode & 077) != 0)
        refuse(file,
               fmt::format("others may read it (mode {:04o}); chmod 600 it", st.st_mode & 07777));
    text.resize(static_cast<std::size_t>(n));
    return checked(text, fmt::format("--secret-file '{}'", file.string()));
}

// Writes a new secret to a private temporary file and links it into place:
// link() fails when the name exists, so of several tuttiruns creating it at
// once one wins and the others read the winner's.
std::string create_secret_file(const std::filesystem::path& file) {
    const auto secret = tutti::tcp::job_secret::generate().to_hex();
    const auto tmp = file.string() + fmt::format(".{}.tmp", ::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) refuse(file, fmt::format("cannot create '{}': {}", tmp, std::strerror(errno)));
    const std::string text = secret + "\n";
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const int write_error = errno;
    ::close(fd);
    if (!written) {
        ::unlink(tmp.c_str());
        refuse(file, fmt::format("cannot write '{}': {}", tmp, std::strerror(write_error)));
    }
    const int linked = ::link(tmp.c_str(), file.c_str()) == 0 ? 0 : errno;
    ::unlink(tmp.c_str());
    if (linked == 0) return secret;
    if (linked != EEXIST) refuse(file, std::strerror(linked));
    auto theirs = read_secret_file(file);
    if (!theirs) refuse(file, "it vanished while being created");
    return *theirs;
}

} // namespace

std::string job_secret_for(const std::optional<std::filesystem::path>& secret_file,
                           const std::optional<std::string>& from_environment, bool partial) {
    if (secret_file) {
        if (auto existing = read_secret_file(*secret_file)) return *existing;
        return create_secret_file(*secret_file);
    }
    if (from_environment && !from_environment->empty())
        return checked(*from_environment, tutti::tcp::job_secret_variable);
    if (partial)
        throw tutti::error(tutti::errc::invalid_argument,
                           fmt::format("this tuttirun starts only part of the job, so the other "
                                       "parts need its secret: pass every tuttirun the same "
                                       "--secret-file FILE (the first creates it) or set {} "
                                       "(64 hex digits, e.g. from `openssl rand -hex 32`)",
                                       tutti::tcp::job_secret_variable));
    return tutti::tcp::job_secret::generate().to_hex();
}

} // namespace tuttirun
