// Copyright (c) cqlstream authors.
//
// FetchContactInfo against a fake HTTPS metadata service (a self-signed
// certificate made here, verification skipped): the answer's framing
// (Content-Length on a kept-alive stream, a stream cut short, a reset) and
// the request it sends; a stop set while the service keeps silent ends the
// fetch before its time-out.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "net/secure_bundle.h"
#include "net/transport.h"

namespace cqlstream::net {
namespace {

using asio::ip::tcp;

struct KeyAndCert {
  std::string key_pem, cert_pem;
};

std::string Pem(const std::function<int(BIO*)>& write) {
  BIO* bio = BIO_new(BIO_s_mem());
  EXPECT_EQ(write(bio), 1);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

// A P-256 key and a self-signed certificate for CN=metadata.test.
KeyAndCert SelfSigned() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("metadata.test"), -1,
                             -1, 0);
  X509_set_issuer_name(x, name);
  EXPECT_GT(X509_sign(x, key, EVP_sha256()), 0);
  KeyAndCert kc;
  kc.key_pem = Pem([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
  kc.cert_pem = Pem([&](BIO* b) { return PEM_write_bio_X509(b, x); });
  X509_free(x);
  EVP_PKEY_free(key);
  return kc;
}

// A TLS server on 127.0.0.1 for one connection: reads the request (up to
// its blank line) into `request`, then hands the stream to `serve`. Owns its
// thread; joins it on destruction.
class FakeMetadataService {
 public:
  using Stream = asio::ssl::stream<tcp::socket>;
  FakeMetadataService(const KeyAndCert& kc, std::function<void(Stream&)> serve)
      : ctx_(asio::ssl::context::tls_server), acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    ctx_.use_certificate_chain(asio::buffer(kc.cert_pem));
    ctx_.use_private_key(asio::buffer(kc.key_pem), asio::ssl::context::pem);
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, serve = std::move(serve)] {
      std::error_code ec;
      Stream s(io_, ctx_);
      acceptor_.accept(s.next_layer(), ec);
      if (ec) return;
      s.handshake(asio::ssl::stream_base::server, ec);
      if (ec) return;
      asio::read_until(s, asio::dynamic_buffer(request_), "\r\n\r\n", ec);
      if (!ec) serve(s);
    });
  }
  ~FakeMetadataService() { thread_.join(); }
  uint16_t port() const { return port_; }
  const std::string& request() const { return request_; }  // after the fetch

 private:
  asio::io_context io_;
  asio::ssl::context ctx_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::string request_;
  std::thread thread_;
};

const std::string kBody = R"({"contact_info": {"type": "sni_proxy", "local_dc": "dc1",
  "contact_points": ["0b8e5d4a-1111-2222-3333-444455556666"], "sni_proxy_address": "127.0.0.1:29042"}})";

void Send(FakeMetadataService::Stream& s, const std::string& bytes) {
  std::error_code ec;
  asio::write(s, asio::buffer(bytes), ec);
}

// Keeps the stream open until the client closes it (or 10 s pass).
void WaitForClose(FakeMetadataService::Stream& s) {
  s.next_layer().non_blocking(false);
  timeval tv{10, 0};
  ::setsockopt(s.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::array<char, 256> buf{};
  std::error_code ec;
  s.read_some(asio::buffer(buf), ec);
}

Status Fetch(const KeyAndCert& kc, uint16_t port, SecureBundle* b, int timeout_ms = 3000,
             const std::atomic<bool>* stop = nullptr) {
  b->origin = "secure bundle 'db.zip'";
  b->route = SecureBundle::Route::kMetadataService;
  b->host = "127.0.0.1";
  b->metadata_port = port;
  b->ca_pem = kc.cert_pem;
  b->cert_pem = kc.cert_pem;
  b->key_pem = Secret(kc.key_pem);
  TlsOptions tls;
  tls.insecure_skip_verify = true;
  return FetchContactInfo(b, tls, std::chrono::milliseconds(timeout_ms), stop);
}

std::string Answer(const std::string& body, size_t content_length) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length:  " + std::to_string(content_length) +
         "\r\n\r\n" + body;
}

TEST(SecureBundleFetchTest, AKeptAliveAnswerEndsAtItsContentLength) {
  const KeyAndCert kc = SelfSigned();
  FakeMetadataService svc(kc, [](FakeMetadataService::Stream& s) {
    Send(s, Answer(kBody, kBody.size()));
    WaitForClose(s);  // HTTP/1.1 keep-alive despite the HTTP/1.0 request
  });
  SecureBundle b;
  Status st = Fetch(kc, svc.port(), &b);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b.route, SecureBundle::Route::kSniProxy);
  EXPECT_EQ(b.sni_proxy.port, 29042);
  EXPECT_EQ(b.host_ids, std::vector<std::string>{"0b8e5d4a-1111-2222-3333-444455556666"});
}

TEST(SecureBundleFetchTest, AStopEndsAFetchThatWaitsForItsAnswer) {
  const KeyAndCert kc = SelfSigned();
  FakeMetadataService svc(kc, [](FakeMetadataService::Stream& s) { WaitForClose(s); });  // never answers
  SecureBundle b;
  std::atomic<bool> stop{false};
  std::jthread later([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.store(true);
  });
  const auto t0 = std::chrono::steady_clock::now();
  Status st = Fetch(kc, svc.port(), &b, 10000, &stop);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << "the fetch ran to its time-out";
  EXPECT_EQ(st.code(), Status::Code::kCancelled) << st.ToString();
  EXPECT_EQ(st.message(), "interrupted");
  EXPECT_EQ(b.route, SecureBundle::Route::kMetadataService);
}

TEST(SecureBundleFetchTest, TheRequestAsksToClose) {
  const KeyAndCert kc = SelfSigned();
  SecureBundle b;
  std::string request;
  {
    FakeMetadataService svc(kc, [](FakeMetadataService::Stream& s) { Send(s, Answer(kBody, kBody.size())); });
    Status st = Fetch(kc, svc.port(), &b);
    ASSERT_TRUE(st.ok()) << st.ToString();
    request = svc.request();
  }
  EXPECT_EQ(request.rfind("GET /metadata HTTP/1.0\r\n", 0), 0u) << request;
  EXPECT_NE(request.find("\r\nConnection: close\r\n"), std::string::npos) << request;
}

TEST(SecureBundleFetchTest, AResetIsConnectionLostNotBadJson) {
  const KeyAndCert kc = SelfSigned();
  FakeMetadataService svc(kc, [](FakeMetadataService::Stream& s) {
    Send(s, Answer(kBody.substr(0, 20), kBody.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s.next_layer().set_option(asio::socket_base::linger(true, 0));  // close sends RST
    std::error_code ec;
    s.next_layer().close(ec);
  });
  SecureBundle b;
  Status st = Fetch(kc, svc.port(), &b);
  EXPECT_EQ(st.code(), Status::Code::kConnectionLost) << st.ToString();
  EXPECT_NE(st.message().find("https://127.0.0.1:" + std::to_string(svc.port()) + "/metadata"), std::string::npos)
      << st.ToString();
}

TEST(SecureBundleFetchTest, AStreamEndingBeforeContentLengthIsConnectionLost) {
  const KeyAndCert kc = SelfSigned();
  FakeMetadataService svc(kc, [](FakeMetadataService::Stream& s) {
    Send(s, Answer(kBody.substr(0, 20), kBody.size()));
    std::error_code ec;
    s.shutdown(ec);  // a clean TLS close
    s.next_layer().close(ec);
  });
  SecureBundle b;
  Status st = Fetch(kc, svc.port(), &b);
  EXPECT_EQ(st.code(), Status::Code::kConnectionLost) << st.ToString();
  EXPECT_NE(st.message().find("Content-Length"), std::string::npos) << st.ToString();
}

TEST(SecureBundleFetchTest, AnAnswerWithoutContentLengthEndsWithTheStream) {
  const KeyAndCert kc = SelfSigned();
  FakeMetadataService svc(kc, [](FakeMetadataService::Stream& s) {
    Send(s, "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + kBody);
    std::error_code ec;
    s.shutdown(ec);
    s.next_layer().close(ec);
  });
  SecureBundle b;
  Status st = Fetch(kc, svc.port(), &b);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b.route, SecureBundle::Route::kSniProxy);
}

TEST(SecureBundleFetchTest, AHugeOrBadContentLengthIsRefused) {
  const KeyAndCert kc = SelfSigned();
  for (const std::string& length : {std::to_string(kMaxSecureBundleEntryBytes + 1), std::string("12x")}) {
    FakeMetadataService svc(kc, [&](FakeMetadataService::Stream& s) {
      Send(s, "HTTP/1.1 200 OK\r\nContent-Length: " + length + "\r\n\r\n{");
      WaitForClose(s);
    });
    SecureBundle b;
    Status st = Fetch(kc, svc.port(), &b);
    EXPECT_EQ(st.code(), Status::Code::kProtocolError) << st.ToString();
    EXPECT_NE(st.message().find("Content-Length"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace cqlstream::net
