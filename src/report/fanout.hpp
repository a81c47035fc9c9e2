#pragma once

#include <vector>

#include <pto/scheduler.hpp>

namespace pto::report {

// Hands every event to each observer in turn, in the order added.
class Fanout final : public RunObserver {
public:
    void add(RunObserver* o) { observers_.push_back(o); }

    void on_start(const Job& j, const JobResult& r) override
    {
        for (auto* o : observers_)
            o->on_start(j, r);
    }
    void on_output(const Job& j, const JobResult& r, std::string_view bytes) override
    {
        for (auto* o : observers_)
            o->on_output(j, r, bytes);
    }
    void on_output_live(const Job& j, const JobResult& r, std::string_view bytes, const JobOutput& kept) override
    {
        for (auto* o : observers_)
            o->on_output_live(j, r, bytes, kept);
    }
    void on_finish(const Job& j, const JobResult& r, const JobOutput& out) override
    {
        for (auto* o : observers_)
            o->on_finish(j, r, out);
    }
    void on_cancel(const Job& j, const JobResult& r) override
    {
        for (auto* o : observers_)
            o->on_cancel(j, r);
    }
    void on_retry(const Job& j, const JobResult& r, const JobOutput& out) override
    {
        for (auto* o : observers_)
            o->on_retry(j, r, out);
    }
    void on_stopping(const char* reason) override
    {
        for (auto* o : observers_)
            o->on_stopping(reason);
    }
    void on_timeout(const Job& j, const JobResult& r, const JobOutput& out, double elapsed_s) override
    {
        for (auto* o : observers_)
            o->on_timeout(j, r, out, elapsed_s);
    }
    void on_status(const StatusReport& report) override
    {
        for (auto* o : observers_)
            o->on_status(report);
    }
    void on_notice(const std::string& text) override
    {
        for (auto* o : observers_)
            o->on_notice(text);
    }
    void on_signal(int sig) override
    {
        for (auto* o : observers_)
            o->on_signal(sig);
    }
    void on_device_sick(const std::string& node, int device, const std::string& why, const JobOutput& out) override
    {
        for (auto* o : observers_)
            o->on_device_sick(node, device, why, out);
    }
    void on_waiting(const Job& j, const std::string& what) override
    {
        for (auto* o : observers_)
            o->on_waiting(j, what);
    }

private:
    std::vector<RunObserver*> observers_;
};

}  // namespace pto::report
