// hello.cpp: the C client from C++ (melissa_trainer.h declares its functions extern "C").
//
//     MELISSA_TRAINER_SIMULATION_ID=0 MELISSA_TRAINER_ENDPOINTS=tcp://127.0.0.1:5555 ./hello_cpp
//
// Sends a 2 x 3 float64 field "greeting" (values 0..5, plus the step) at time steps 0, 1
// and 2, then closes; exits 1 with the client's message on any error.
#include <array>
#include <cstdint>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "melissa_trainer.h"

namespace {

// The client's last message as an exception (a null client: the status's text).
void check(const mt_client *c, mt_status status, const char *what) {
    if (status != MT_OK)
        throw std::runtime_error(std::string(what) + ": " +
                                 (c != nullptr ? mt_client_error(c) : mt_strerror(status)));
}

// Owns a client: aborts it (no BYE) unless it was closed.
struct ClientDeleter {
    void operator()(mt_client *c) const { mt_client_abort(c); }
};
using Client = std::unique_ptr<mt_client, ClientDeleter>;

}  // namespace

int main() {
    try {
        mt_client *raw = nullptr;
        check(nullptr, mt_client_create(&raw), "mt_client_create");
        Client client(raw);
        const std::array<std::uint64_t, 2> shape{2, 3};
        check(raw, mt_declare_field(raw, "greeting", MT_FLOAT64, 2, shape.data()),
              "mt_declare_field");
        check(raw, mt_client_start(raw), "mt_client_start");
        std::vector<double> field(6);
        for (std::uint64_t step = 0; step < 3; ++step) {
            for (std::size_t i = 0; i < field.size(); ++i)
                field[i] = static_cast<double>(i + step);
            check(raw, mt_send(raw, step, "greeting", MT_FLOAT64, field.data(), field.size()),
                  "mt_send");
        }
        check(nullptr, mt_client_close(client.release()), "mt_client_close");
        std::cout << "hello_cpp: sent 3 steps\n";
        return 0;
    } catch (const std::exception &e) {
        std::cerr << "hello_cpp: " << e.what() << '\n';
        return 1;
    }
}
