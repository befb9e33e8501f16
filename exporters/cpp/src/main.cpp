// embeval-bow: embed an embeval export folder with the hashing bag of words of
// exporters/bow_numpy.py and write the vectors file (one float32 dataset per list: /TASK,
// /TASK.ROLE for a task's role lists, /ALL for a union).
//
//   embeval-bow --export DIR --out FILE [--dim 1024] [--batch-size 4096] [--prompt ROLE=TEXT ...]
//               [--overwrite] [--quiet]
//
// --prompt ROLE=TEXT prepends TEXT to every sentence of the lists of ROLE (text, query, document)
// and records it in the attribute `prompt` of their datasets.
// Bad input: one line on stderr and exit code 2.
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bow.hpp"
#include "export_folder.hpp"
#include "vectors_file.hpp"

namespace {

const char* PROG = "embeval-bow";
const char* USAGE =
    "usage: embeval-bow --export DIR --out FILE [--dim N] [--batch-size N] [--prompt ROLE=TEXT ...]\n"
    "                   [--overwrite] [--quiet]\n"
    "Embed every sentence list of an embeval export folder (per-task or union, role lists, JSON\n"
    "lines) with the hashing bag of words of exporters/bow_numpy.py and write the vectors file (HDF5).\n"
    "--prompt ROLE=TEXT prepends TEXT to each sentence of the lists of ROLE (text, query, document)\n"
    "and records it in their datasets' `prompt` attribute; repeat for each role.\n";

struct Options {
    std::string export_dir, out;
    size_t dim = 1024, batch_size = 4096;
    bool overwrite = false, quiet = false;
    std::vector<std::pair<std::string, std::string>> prompts;  // (role, text), in command-line order
};

std::pair<std::string, std::string> prompt_of(const std::string& value, const Options& o) {
    size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0) {
        throw std::runtime_error("--prompt '" + value + "': expected ROLE=TEXT, e.g. --prompt query=\"query: \"");
    }
    std::string role = value.substr(0, eq);
    for (const auto& given : o.prompts) {
        if (given.first == role) throw std::runtime_error("--prompt " + role + "=...: given twice");
    }
    return {role, value.substr(eq + 1)};
}

size_t positive(const std::string& flag, const std::string& text) {
    size_t used = 0;
    unsigned long long v = 0;
    try {
        v = std::stoull(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || v == 0 || text[0] == '-') throw std::runtime_error(flag + " needs a positive integer, got '" + text + "'");
    return static_cast<size_t>(v);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "-h" || arg == "--help") { std::cout << USAGE; std::exit(0); }
        else if (arg == "--export") o.export_dir = value();
        else if (arg == "--out") o.out = value();
        else if (arg == "--dim") o.dim = positive(arg, value());
        else if (arg == "--batch-size") o.batch_size = positive(arg, value());
        else if (arg == "--prompt") o.prompts.push_back(prompt_of(value(), o));
        else if (arg == "--overwrite") o.overwrite = true;
        else if (arg == "--quiet") o.quiet = true;
        else throw std::runtime_error("unknown argument '" + arg + "' (see --help)");
    }
    if (o.export_dir.empty() || o.out.empty()) throw std::runtime_error("--export and --out are required (see --help)");
    return o;
}

std::string parent_of(const std::string& path) {
    size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

std::string name_of(const std::string& path) {
    size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

class Progress {
public:
    Progress(size_t total, bool quiet) : total_(total), quiet_(quiet), last_(clock::now()) {}
    void update(const std::string& name, size_t n) {
        done_ += n;
        auto now = clock::now();
        if (quiet_ || (now - last_ < std::chrono::seconds(2) && done_ != total_)) return;
        last_ = now;
        std::fprintf(stderr, "%s: %s: %zu/%zu sentences (%.0f%%)\n", PROG, name.c_str(), done_, total_,
                     total_ ? 100.0 * double(done_) / double(total_) : 100.0);
    }

private:
    using clock = std::chrono::steady_clock;
    size_t total_, done_ = 0;
    bool quiet_;
    clock::time_point last_;
};

void write_vectors(const Options& o, const std::vector<SentenceList>& lists, const std::string& tmp) {
    size_t total = 0;
    for (const auto& list : lists) total += list.sentences.size();
    Progress progress(total, o.quiet);
    VectorsFile file(tmp);
    std::vector<float> block;
    for (const auto& list : lists) {
        file.begin_dataset(list.name, list.sentences.size(), o.dim);
        for (size_t start = 0; start < list.sentences.size(); start += o.batch_size) {
            size_t rows = std::min(o.batch_size, list.sentences.size() - start);
            block.assign(rows * o.dim, 0.0f);
            for (size_t r = 0; r < rows; ++r) {
                bow_vector(list.prompt + list.sentences[start + r], o.dim, block.data() + r * o.dim);
            }
            file.append(block, rows);
            progress.update(list.name, rows);
        }
        file.set_attribute("sha256", list.sha256);
        if (!list.prompt.empty()) file.set_attribute("prompt", list.prompt);
        if (list.name == "ALL") {
            std::string joined;
            for (size_t i = 0; i < list.tasks.size(); ++i) joined += (i ? "," : "") + list.tasks[i];
            file.set_attribute("tasks", joined);
        }
        file.end_dataset();
    }
    file.close();
}

// Give each list the prompt of its role; note on stderr a prompt that no list of the export uses.
void apply_prompts(const Options& o, std::vector<SentenceList>& lists) {
    for (const auto& prompt : o.prompts) {
        bool used = false;
        for (auto& list : lists) {
            if (list.role == prompt.first) {
                list.prompt = prompt.second;
                used = true;
            }
        }
        if (!used && !o.quiet) {
            std::fprintf(stderr, "%s: note: this export has no list of role %s; that prompt is not used\n", PROG,
                         prompt.first.c_str());
        }
    }
}

int run(int argc, char** argv) {
    Options o = parse(argc, argv);
    struct stat st;
    if (stat(o.out.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode)) throw std::runtime_error(o.out + ": exists and is not a file");
        if (!o.overwrite) throw std::runtime_error(o.out + ": file exists; pass --overwrite to replace it");
    }
    std::vector<SentenceList> lists = read_export(o.export_dir);
    apply_prompts(o, lists);
    std::string parent = parent_of(o.out);
    if (stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw std::runtime_error(parent + ": output folder not found");
    }
    std::string tmp = parent + "/." + name_of(o.out) + "." + std::to_string(getpid()) + ".tmp";
    try {
        write_vectors(o, lists, tmp);
    } catch (...) {
        std::remove(tmp.c_str());
        throw;
    }
    if (std::rename(tmp.c_str(), o.out.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw std::runtime_error(o.out + ": cannot rename the finished file into place");
    }
    if (!o.quiet) {
        std::string names;
        for (const auto& list : lists) names += (names.empty() ? "" : ", ") + list.name;
        std::fprintf(stderr, "%s: wrote %s (%s; dim %zu)\n", PROG, o.out.c_str(), names.c_str(), o.dim);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors are reported as one line, not HDF5's stack
    try {
        return run(argc, argv);
    } catch (const std::exception& err) {
        std::fprintf(stderr, "%s: error: %s\n", PROG, err.what());
        return 2;
    }
}
