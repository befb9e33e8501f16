// An embeval export folder: manifest.json and the sentence lists it fingerprints.
#pragma once
#include <string>
#include <vector>

struct SentenceList {
    std::string name;                  // dataset name: TASK, TASK.ROLE (a role list), or ALL (a union)
    std::string role = "text";         // text, or the role of a task's list (query, document)
    std::string sha256;                // the fingerprint from the manifest
    std::vector<std::string> tasks;    // union only: the tasks it was built from
    std::vector<std::string> sentences;
    std::string prompt;                // prepended to each sentence before embedding ("" for none)
};

// Read every list the manifest asks for (the union's, then each task's lists in manifest order: one
// per task, or one per role), each checked against its sha256 and count. A list is one sentence a
// line, or JSON lines (one JSON string a line) when its entry says "format": "jsonl".
// Throws std::runtime_error with a one-line message naming the file and the task.
std::vector<SentenceList> read_export(const std::string& folder);
