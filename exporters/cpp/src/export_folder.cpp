#include "export_folder.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>

#include "json.hpp"
#include "sha256.hpp"

namespace {

bool is_directory(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool read_file(const std::string& path, std::string& data) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) return false;
    data = buffer.str();
    return true;
}

// Offset of the first byte that is not well-formed UTF-8 (Unicode table 3-7), or npos.
size_t invalid_utf8(const std::string& s) {
    size_t i = 0, n = s.size();
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    auto cont = [&](size_t k, unsigned lo, unsigned hi) { return k < n && byte(k) >= lo && byte(k) <= hi; };
    while (i < n) {
        unsigned c = byte(i);
        if (c < 0x80) { i += 1; continue; }
        if (c >= 0xC2 && c <= 0xDF && cont(i + 1, 0x80, 0xBF)) { i += 2; continue; }
        if (c == 0xE0 && cont(i + 1, 0xA0, 0xBF) && cont(i + 2, 0x80, 0xBF)) { i += 3; continue; }
        if (((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) && cont(i + 1, 0x80, 0xBF) &&
            cont(i + 2, 0x80, 0xBF)) { i += 3; continue; }
        if (c == 0xED && cont(i + 1, 0x80, 0x9F) && cont(i + 2, 0x80, 0xBF)) { i += 3; continue; }
        if (c == 0xF0 && cont(i + 1, 0x90, 0xBF) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF)) { i += 4; continue; }
        if (c >= 0xF1 && c <= 0xF3 && cont(i + 1, 0x80, 0xBF) && cont(i + 2, 0x80, 0xBF) &&
            cont(i + 3, 0x80, 0xBF)) { i += 4; continue; }
        if (c == 0xF4 && cont(i + 1, 0x80, 0x8F) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF)) { i += 4; continue; }
        return i;
    }
    return std::string::npos;
}

struct Entry {
    std::string file;
    size_t count = 0;
    std::string sha256;
    bool jsonl = false;
};

Entry entry_of(const Json& raw, const std::string& manifest, const std::string& name) {
    const Json* file = raw.get("file");
    const Json* count = raw.get("count");
    const Json* sha = raw.get("sha256");
    if (!file || file->type != Json::Type::String || !count || !count->is_integer() || count->number < 0 ||
        !sha || sha->type != Json::Type::String) {
        throw std::runtime_error(manifest + ": " + name + ": entry needs file, count and sha256");
    }
    if (file->text.empty() || file->text == "." || file->text == ".." ||
        file->text.find_first_of("/\\") != std::string::npos) {
        throw std::runtime_error(manifest + ": " + name + ": file '" + file->text + "' is not a plain file name");
    }
    Entry e{file->text, static_cast<size_t>(count->number), sha->text};
    for (char& c : e.sha256) c = (c >= 'A' && c <= 'F') ? char(c - 'A' + 'a') : c;
    if (const Json* format = raw.get("format")) {
        if (format->type != Json::Type::String || (format->text != "lines" && format->text != "jsonl")) {
            throw std::runtime_error(manifest + ": " + name +
                                     ": list format is not supported (this exporter reads lines, jsonl)");
        }
        e.jsonl = format->text == "jsonl";
    }
    return e;
}

SentenceList read_list(const std::string& folder, const Entry& e, const std::string& name) {
    std::string path = folder + "/" + e.file;
    std::string data;
    if (!read_file(path, data)) throw std::runtime_error(path + ": " + name + ": cannot read export file");
    if (sha256_hex(data) != e.sha256) {
        throw std::runtime_error(path + ": " + name + ": file differs from its manifest fingerprint (edited or truncated?)");
    }
    size_t bad = invalid_utf8(data);
    if (bad != std::string::npos) {
        throw std::runtime_error(path + ": " + name + ": not valid UTF-8 (byte " + std::to_string(bad) + ")");
    }
    if (!data.empty() && data.back() != '\n') {
        throw std::runtime_error(path + ": " + name + ": the last line has no newline (truncated?)");
    }
    SentenceList list;
    list.name = name;
    list.sha256 = e.sha256;
    size_t start = 0;
    while (start < data.size()) {
        size_t end = data.find('\n', start);
        list.sentences.emplace_back(data, start, end - start);
        start = end + 1;
    }
    if (list.sentences.size() != e.count) {
        throw std::runtime_error(path + ": " + name + ": " + std::to_string(list.sentences.size()) +
                                 " lines, the manifest says " + std::to_string(e.count));
    }
    if (e.jsonl) {
        for (size_t i = 0; i < list.sentences.size(); ++i) {
            Json value;
            try {
                value = parse_json(list.sentences[i]);
            } catch (const std::runtime_error&) {
                value.type = Json::Type::Null;
            }
            if (value.type != Json::Type::String) {
                throw std::runtime_error(path + ": " + name + ": line " + std::to_string(i + 1) +
                                         " is not a JSON string");
            }
            list.sentences[i] = std::move(value.text);
        }
    }
    return list;
}

void check_name(const std::string& name, const std::string& manifest) {
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
        throw std::runtime_error(manifest + ": '" + name + "' cannot name a dataset");
    }
}

}  // namespace

std::vector<SentenceList> read_export(const std::string& folder) {
    if (!is_directory(folder)) throw std::runtime_error(folder + ": export folder not found");
    std::string manifest_path = folder + "/manifest.json";
    std::string text;
    if (!read_file(manifest_path, text)) {
        throw std::runtime_error(folder + ": no manifest.json: not an embeval export folder");
    }
    Json manifest;
    try {
        manifest = parse_json(text);
    } catch (const std::runtime_error& err) {
        throw std::runtime_error(manifest_path + ": unreadable manifest (" + err.what() + ")");
    }
    const Json* format = manifest.get("format");
    if (!format || format->type != Json::Type::String || format->text != "embeval-sentences") {
        throw std::runtime_error(manifest_path + ": not an embeval-sentences manifest");
    }
    const Json* version = manifest.get("format_version");
    if (!version || !version->is_integer() || version->number != 1) {
        throw std::runtime_error(manifest_path + ": format_version is not supported (this exporter reads 1)");
    }
    std::vector<SentenceList> lists;
    const Json* u = manifest.get("union");
    const Json* tasks = manifest.get("tasks");
    if (!tasks || tasks->type != Json::Type::Object || (tasks->members.empty() && !u)) {
        throw std::runtime_error(manifest_path + ": the manifest lists no tasks");
    }
    if (u) {
        const Json* union_tasks = u->get("tasks");
        if (!union_tasks || union_tasks->type != Json::Type::Array) {
            throw std::runtime_error(manifest_path + ": union entry needs a list of tasks");
        }
        SentenceList list = read_list(folder, entry_of(*u, manifest_path, "ALL"), "ALL");
        for (const Json& t : union_tasks->items) {
            if (t.type != Json::Type::String) throw std::runtime_error(manifest_path + ": union tasks must be strings");
            list.tasks.push_back(t.text);
        }
        lists.push_back(std::move(list));
    }
    for (const auto& member : tasks->members) {
        const std::string& task = member.first;
        if (const Json* roles = member.second.get("roles")) {
            if (roles->type != Json::Type::Object || roles->members.empty()) {
                throw std::runtime_error(manifest_path + ": " + task + ": `roles` needs a list per role");
            }
            for (const auto& role : roles->members) {
                std::string dataset = task + "." + role.first;
                if (const Json* named = role.second.get("dataset")) {
                    if (named->type != Json::Type::String) {
                        throw std::runtime_error(manifest_path + ": " + task + ": role " + role.first +
                                                 ": dataset must be a string");
                    }
                    dataset = named->text;
                }
                if (role.first.empty()) throw std::runtime_error(manifest_path + ": " + task + ": a role has no name");
                check_name(dataset, manifest_path);
                SentenceList list = read_list(folder, entry_of(role.second, manifest_path, dataset), dataset);
                list.role = role.first;
                lists.push_back(std::move(list));
            }
        } else if (!u) {
            check_name(task, manifest_path);
            lists.push_back(read_list(folder, entry_of(member.second, manifest_path, task), task));
        }
    }
    for (size_t i = 0; i < lists.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
            if (lists[i].name == lists[j].name) {
                throw std::runtime_error(manifest_path + ": two lists name the dataset '" + lists[i].name + "'");
            }
        }
    }
    return lists;
}
