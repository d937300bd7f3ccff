// Aggregation in the tracer: rule compiler, settings, per-thread tables and the record lines
// (aggregation.h; docs/aggregation.md).
#include "aggregation.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../format/event.h"
#include "../format/json_text.h"

namespace dftracer {
namespace agg {

// ------------------------------------------------------------------------------ rules
namespace {
enum Field : uint8_t { F_NAME, F_CAT, F_TS, F_DUR };
enum Op : uint8_t { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_LIKE, OP_IN, OP_AND, OP_OR, OP_NOT };

// SQL LIKE: '%' any run of characters, '_' one character (iterative, with one backtrack point).
bool like(std::string_view s, std::string_view p) noexcept {
  size_t si = 0, pi = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '_' || p[pi] == s[si])) {
      ++si;
      ++pi;
    } else if (pi < p.size() && p[pi] == '%') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '%') ++pi;
  return pi == p.size();
}

struct Token {
  enum Kind { END, WORD, STRING, LPAREN, RPAREN, LBRACE, RBRACE, COMMA, OPER } kind;
  std::string text;
};

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}
  bool next(Token* t, std::string* err) {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    t->text.clear();
    if (i_ >= s_.size()) {
      t->kind = Token::END;
      return true;
    }
    char c = s_[i_];
    if (c == '(' || c == ')' || c == '{' || c == '}' || c == ',') {
      t->kind = c == '('   ? Token::LPAREN
                : c == ')' ? Token::RPAREN
                : c == '{' ? Token::LBRACE
                : c == '}' ? Token::RBRACE
                           : Token::COMMA;
      t->text = c;
      ++i_;
      return true;
    }
    if (c == '\'' || c == '"') {
      size_t e = s_.find(c, i_ + 1);
      if (e == std::string_view::npos) {
        *err = "unterminated quote";
        return false;
      }
      t->kind = Token::STRING;
      t->text = std::string(s_.substr(i_ + 1, e - i_ - 1));
      i_ = e + 1;
      return true;
    }
    if (c == '=' || c == '!' || c == '<' || c == '>') {
      size_t n = (i_ + 1 < s_.size() && s_[i_ + 1] == '=') ? 2 : 1;
      t->text = std::string(s_.substr(i_, n));
      if (t->text == "=" || t->text == "!") {
        *err = "unknown operator '" + t->text + "'";
        return false;
      }
      t->kind = Token::OPER;
      i_ += n;
      return true;
    }
    size_t b = i_;
    while (i_ < s_.size()) {
      char d = s_[i_];
      if (std::isspace(static_cast<unsigned char>(d)) || d == '(' || d == ')' || d == '{' || d == '}' || d == ',' ||
          d == '=' || d == '!' || d == '<' || d == '>' || d == '\'' || d == '"')
        break;
      ++i_;
    }
    t->kind = Token::WORD;
    t->text = std::string(s_.substr(b, i_ - b));
    return true;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool to_int(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *v = n;
  return true;
}
}  // namespace

struct Node {
  Op op;
  Field field = F_NAME;
  int64_t num = 0;
  std::string str;
  std::vector<std::string> set;
  std::unique_ptr<Node> a, b;
};

namespace {
class Parser {
 public:
  Parser(std::string_view s, std::string* err) : lx_(s), err_(err) {}
  bool per_call = false;
  std::unique_ptr<Node> parse() {
    if (!advance()) return nullptr;
    auto n = parse_or();
    if (!n) return nullptr;
    if (tok_.kind != Token::END) return fail("unexpected '" + tok_.text + "'");
    return n;
  }

 private:
  bool advance() { return lx_.next(&tok_, err_); }
  std::unique_ptr<Node> fail(const std::string& why) {
    if (err_->empty()) *err_ = why;
    return nullptr;
  }
  bool is_word(const char* w) const { return tok_.kind == Token::WORD && upper(tok_.text) == w; }
  std::unique_ptr<Node> binary(Op op, std::unique_ptr<Node> a, std::unique_ptr<Node> b) {
    auto n = std::make_unique<Node>();
    n->op = op;
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }
  std::unique_ptr<Node> parse_or() {
    auto l = parse_and();
    while (l && (is_word("OR") || (tok_.kind == Token::OPER && tok_.text == "||"))) {
      if (!advance()) return nullptr;
      auto r = parse_and();
      if (!r) return nullptr;
      l = binary(OP_OR, std::move(l), std::move(r));
    }
    return l;
  }
  std::unique_ptr<Node> parse_and() {
    auto l = parse_not();
    while (l && is_word("AND")) {
      if (!advance()) return nullptr;
      auto r = parse_not();
      if (!r) return nullptr;
      l = binary(OP_AND, std::move(l), std::move(r));
    }
    return l;
  }
  std::unique_ptr<Node> parse_not() {
    if (is_word("NOT")) {
      if (!advance()) return nullptr;
      auto a = parse_not();
      if (!a) return nullptr;
      return binary(OP_NOT, std::move(a), nullptr);
    }
    if (tok_.kind == Token::LPAREN) {
      if (!advance()) return nullptr;
      auto n = parse_or();
      if (!n) return nullptr;
      if (tok_.kind != Token::RPAREN) return fail("missing ')'");
      if (!advance()) return nullptr;
      return n;
    }
    return parse_cmp();
  }
  std::unique_ptr<Node> parse_cmp() {
    if (tok_.kind != Token::WORD)
      return fail(tok_.kind == Token::END ? "empty rule" : "expected a field, got '" + tok_.text + "'");
    auto n = std::make_unique<Node>();
    std::string f = tok_.text;
    std::string lf = f;
    for (auto& c : lf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lf == "name") n->field = F_NAME;
    else if (lf == "cat") n->field = F_CAT;
    else if (lf == "ts") n->field = F_TS;
    else if (lf == "dur") n->field = F_DUR;
    else if (lf == "app" || lf == "rank")
      return fail("field '" + f + "' is not supported by this tracer (use cat, name, ts, dur)");
    else return fail("unknown field '" + f + "' (use cat, name, ts, dur)");
    bool numeric = n->field == F_TS || n->field == F_DUR;
    per_call |= numeric;
    if (!advance()) return nullptr;
    if (is_word("IN")) {
      if (numeric) return fail("IN applies to cat and name");
      n->op = OP_IN;
      if (!advance()) return nullptr;
      if (tok_.kind != Token::LBRACE) return fail("IN expects {a,b,...}");
      if (!advance()) return nullptr;
      while (tok_.kind == Token::WORD || tok_.kind == Token::STRING) {
        n->set.push_back(tok_.text);
        if (!advance()) return nullptr;
        if (tok_.kind == Token::COMMA && !advance()) return nullptr;
      }
      if (tok_.kind != Token::RBRACE) return fail("IN list not closed with '}'");
      if (!advance()) return nullptr;
      return n;
    }
    if (is_word("LIKE")) {
      if (numeric) return fail("LIKE applies to cat and name");
      n->op = OP_LIKE;
    } else if (tok_.kind == Token::OPER) {
      const std::string& o = tok_.text;
      n->op = o == "==" ? OP_EQ : o == "!=" ? OP_NE : o == "<" ? OP_LT : o == "<=" ? OP_LE : o == ">" ? OP_GT : OP_GE;
      if (!numeric && n->op != OP_EQ && n->op != OP_NE) return fail("'" + o + "' applies to ts and dur");
    } else {
      return fail("expected an operator after '" + f + "'");
    }
    if (!advance()) return nullptr;
    if (tok_.kind != Token::WORD && tok_.kind != Token::STRING) return fail("expected a value after the operator");
    if (numeric) {
      if (!to_int(tok_.text, &n->num)) return fail("'" + tok_.text + "' is not an integer (µs)");
    } else {
      n->str = tok_.text;
    }
    if (!advance()) return nullptr;
    return n;
  }
  Lexer lx_;
  Token tok_;
  std::string* err_;
};

bool eval(const Node& n, std::string_view name, std::string_view cat, int64_t ts, int64_t dur) noexcept {
  switch (n.op) {
    case OP_AND: return eval(*n.a, name, cat, ts, dur) && eval(*n.b, name, cat, ts, dur);
    case OP_OR: return eval(*n.a, name, cat, ts, dur) || eval(*n.b, name, cat, ts, dur);
    case OP_NOT: return !eval(*n.a, name, cat, ts, dur);
    default: break;
  }
  if (n.field == F_TS || n.field == F_DUR) {
    int64_t v = n.field == F_TS ? ts : dur;
    switch (n.op) {
      case OP_EQ: return v == n.num;
      case OP_NE: return v != n.num;
      case OP_LT: return v < n.num;
      case OP_LE: return v <= n.num;
      case OP_GT: return v > n.num;
      case OP_GE: return v >= n.num;
      default: return false;
    }
  }
  std::string_view s = n.field == F_NAME ? name : cat;
  switch (n.op) {
    case OP_EQ: return s == n.str;
    case OP_NE: return s != n.str;
    case OP_LIKE: return like(s, n.str);
    case OP_IN:
      for (const auto& v : n.set)
        if (s == v) return true;
      return false;
    default: return false;
  }
}
}  // namespace

Rule::~Rule() = default;

std::unique_ptr<Rule> Rule::parse(std::string_view text, std::string* err) {
  err->clear();
  Parser p(text, err);
  auto root = p.parse();
  if (!root) {
    if (err->empty()) *err = "cannot parse";
    return nullptr;
  }
  std::unique_ptr<Rule> r(new Rule());
  r->root_ = std::move(root);
  r->per_call_ = p.per_call;
  return r;
}

bool Rule::matches(std::string_view name, std::string_view cat, int64_t ts, int64_t dur) const noexcept {
  return eval(*root_, name, cat, ts, dur);
}

uint8_t Settings::static_part(std::string_view name, std::string_view cat) const noexcept {
  if (cat == DFT_TRACER_CATEGORY) return 2;
  if (!selective) return 1;
  uint8_t st = 0;
  for (const auto& r : inclusion)
    if (!r->per_call() && r->matches(name, cat, 0, 0)) {
      st |= 1;
      break;
    }
  for (const auto& r : exclusion)
    if (!r->per_call() && r->matches(name, cat, 0, 0)) {
      st |= 2;
      break;
    }
  return st;
}

bool Settings::wants_given(uint8_t st, std::string_view name, std::string_view cat, int64_t ts,
                           int64_t dur) const noexcept {
  if (st & 2) return false;
  if (!selective) return true;
  bool in = (st & 1) || inclusion.empty();
  for (size_t i = 0; !in && i < inclusion.size(); ++i)
    in = inclusion[i]->per_call() && inclusion[i]->matches(name, cat, ts, dur);
  if (!in) return false;
  for (const auto& r : exclusion)
    if (r->per_call() && r->matches(name, cat, ts, dur)) return false;
  return true;
}

namespace {
Settings* build_settings() {
  auto* s = new Settings();
  const Config& c = config();
  s->on = c.aggregation_enable;
  s->selective = c.aggregation_selective;
  s->interval_us = static_cast<int64_t>(c.trace_interval_ms) * 1000;
  if (s->on && s->selective) {
    auto compile = [](const std::vector<std::string>& texts, const char* list,
                      std::vector<std::unique_ptr<Rule>>& out) {
      for (const auto& t : texts) {
        std::string err;
        auto r = Rule::parse(t, &err);
        if (r) out.push_back(std::move(r));
        else
          std::fprintf(stderr, "dftracer: warning: aggregation %s rule \"%s\" ignored: %s\n", list, t.c_str(),
                       err.c_str());
      }
    };
    compile(c.aggregation_inclusion, "inclusion", s->inclusion);
    compile(c.aggregation_exclusion, "exclusion", s->exclusion);
    // Every inclusion rule was bad: aggregating everything would fold what the user meant to keep.
    if (s->inclusion.empty() && !c.aggregation_inclusion.empty()) {
      std::fprintf(stderr, "dftracer: warning: no valid aggregation inclusion rule; aggregation disabled\n");
      s->on = false;
    }
  }
  return s;
}
}  // namespace

const Settings& settings() {
  static const Settings* s = build_settings();
  return *s;
}

// ------------------------------------------------------------------------------ tables
void AggField::add_int(int64_t v) noexcept {
  if (dbl) {
    add_double(static_cast<double>(v));
    return;
  }
  if (n == 0) {
    imin = imax = v;
  } else {
    if (v < imin) imin = v;
    if (v > imax) imax = v;
  }
  isum = static_cast<int64_t>(static_cast<uint64_t>(isum) + static_cast<uint64_t>(v));
  ++n;
}

void AggField::add_double(double v) noexcept {
  if (!dbl) {  // integers so far: continue as doubles
    dbl = true;
    dmin = static_cast<double>(imin);
    dmax = static_cast<double>(imax);
    dsum = static_cast<double>(isum);
  }
  if (n == 0) {
    dmin = dmax = v;
  } else {
    if (v < dmin) dmin = v;
    if (v > dmax) dmax = v;
  }
  dsum += v;
  ++n;
}

namespace {
inline uint64_t mix(uint64_t h, std::string_view s) noexcept {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

AggEntry* AggTable::find(std::string_view name, std::string_view cat, const char* nptr, const char* cptr, uint64_t h,
                         bool failed, bool has_size, int64_t size) {
  auto same = [&](const AggEntry& e) {
    if (e.failed != failed || e.has_size != has_size || e.size != size) return false;
    if (nptr && e.nptr == nptr && e.cptr == cptr) return true;
    return e.hash == h && e.name == name && e.cat == cat;
  };
  if (slots_.empty()) slots_.assign(64, -1);
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    int32_t k = slots_[i];
    if (k < 0) {
      if ((entries_.size() + 1) * 2 > slots_.size()) {  // grow, then insert
        std::vector<int32_t> ns(slots_.size() * 2, -1);
        size_t nm = ns.size() - 1;
        for (size_t j = 0; j < entries_.size(); ++j) {
          size_t p = entries_[j].hash & nm;
          while (ns[p] >= 0) p = (p + 1) & nm;
          ns[p] = static_cast<int32_t>(j);
        }
        slots_.swap(ns);
        return find(name, cat, nptr, cptr, h, failed, has_size, size);
      }
      AggEntry e;
      e.name = std::string(name);
      e.cat = std::string(cat);
      e.nptr = nptr;
      e.cptr = cptr;
      e.hash = h;
      e.failed = failed;
      e.has_size = has_size;
      e.size = size;
      e.plain = json::is_plain(name.data(), name.size()) && json::is_plain(cat.data(), cat.size());
      entries_.push_back(std::move(e));
      slots_[i] = static_cast<int32_t>(entries_.size() - 1);
      last_ = entries_.size() - 1;
      return &entries_.back();
    }
    if (same(entries_[k])) {
      last_ = static_cast<size_t>(k);
      return &entries_[k];
    }
  }
}

void AggTable::add(std::string_view name, std::string_view cat, const char* nptr, const char* cptr, bool plain,
                   int64_t dur, const AggArg* args, int nargs) noexcept {
  (void)plain;
  bool failed = false, has_size = false;
  int64_t size = 0;
  for (int i = 0; i < nargs; ++i) {
    const AggArg& a = args[i];
    if (a.key.size() == 3 && a.key == "ret" && (a.dbl ? a.d < 0 : a.i < 0)) failed = true;
    else if (a.key.size() == 4 && a.key == "size" && !a.dbl) {
      has_size = true;
      size = a.i;
    }
  }
  AggEntry* e = nullptr;
  if (last_ < entries_.size()) {  // consecutive calls of one function: no hashing
    AggEntry& l = entries_[last_];
    if (l.failed == failed && l.has_size == has_size && l.size == size &&
        ((nptr && l.nptr == nptr && l.cptr == cptr) || (l.name == name && l.cat == cat)))
      e = &l;
  }
  if (!e) {
    uint64_t h = mix(mix(1469598103934665603ull, name) * 31 + 7, cat) ^ (failed ? 0x9e3779b97f4a7c15ull : 0) ^
                 (has_size ? static_cast<uint64_t>(size) * 0xff51afd7ed558ccdull + 1 : 0);
    try {
      e = find(name, cat, nptr, cptr, h, failed, has_size, size);
    } catch (...) {  // out of memory: the call is lost, the application goes on
      return;
    }
  }
  if (dur < 0) dur = 0;
  if (e->cnt == 0) {
    e->dmin = e->dmax = dur;
    e->dsum = 0;
    for (auto& f : e->fields) {
      f.n = 0;
      f.dbl = false;
      f.isum = 0;
      f.dsum = 0;
    }
    ++live_;
  } else {
    if (dur < e->dmin) e->dmin = dur;
    if (dur > e->dmax) e->dmax = dur;
  }
  e->dsum += dur;
  ++e->cnt;
  for (int i = 0; i < nargs; ++i) {
    const AggArg& a = args[i];
    AggField* f = nullptr;
    // Calls of one function usually pass their keys in the same order: try position i first.
    if (static_cast<size_t>(i) < e->fields.size()) {
      AggField& g = e->fields[static_cast<size_t>(i)];
      if ((a.kptr && g.kptr == a.kptr) || g.key == a.key) f = &g;
    }
    if (!f)
      for (auto& g : e->fields)
        if ((a.kptr && g.kptr == a.kptr) || g.key == a.key) {
          f = &g;
          break;
        }
    if (!f) {
      try {
        AggField g;
        g.key = std::string(a.key);
        g.kptr = a.kptr;
        e->fields.push_back(std::move(g));
      } catch (...) {
        continue;
      }
      f = &e->fields.back();
    }
    if (a.dbl) f->add_double(a.d);
    else f->add_int(a.i);
  }
}

size_t AggTable::text_bound(const IdsPrefix& ids) const noexcept {
  size_t n = 0;
  for (const auto& e : entries_) {
    if (!e.cnt) continue;
    n += 96 + ids.len + json::max_escaped(e.name.size() + e.cat.size()) + 3 * (12 + json::kMaxNumber) + 40;
    for (const auto& f : e.fields) n += 3 * (json::max_escaped(f.key.size()) + 8 + json::kMaxNumber);
  }
  return n;
}

namespace {
inline char* key_suffix(char* p, const std::string& key, const char* suffix, size_t sl) {
  *p++ = ',';
  *p++ = '"';
  p = json::write_escaped(p, key.data(), key.size());
  std::memcpy(p, suffix, sl);
  p += sl;
  return p;
}
}  // namespace

char* AggTable::write_lines(char* p, const IdsPrefix& ids, uint32_t* lines) noexcept {
  uint32_t nl = 0;
  for (auto& e : entries_) {
    if (!e.cnt) continue;
    p = json::write_lit(p, "{\"name\":");
    p = json::write_quoted(p, e.name);
    p = json::write_lit(p, ",\"cat\":");
    p = json::write_quoted(p, e.cat);
    std::memcpy(p, ids.text, ids.len);  // ,"pid":P,"tid":T,"ts":
    p += ids.len;
    p = json::write_i64(p, bucket);
    p = json::write_lit(p, ",\"ph\":3,\"args\":{");
    char* open = p;    // every key starts with ','; the first one is dropped below
    if (e.cnt == 1) {  // one call: its own values under the plain keys (upstream's layout)
      p = json::write_lit(p, ",\"dur\":");
      p = json::write_i64(p, e.dsum);
      for (const auto& f : e.fields) {
        if (!f.n) continue;
        p = key_suffix(p, f.key, "\":", 2);
        p = f.dbl ? json::write_double(p, f.dsum) : json::write_i64(p, f.isum);
      }
    } else {
      p = json::write_lit(p, ",\"dur_sum\":");
      p = json::write_i64(p, e.dsum);
      p = json::write_lit(p, ",\"dur_min\":");
      p = json::write_i64(p, e.dmin);
      p = json::write_lit(p, ",\"dur_max\":");
      p = json::write_i64(p, e.dmax);
      for (const auto& f : e.fields) {
        if (!f.n) continue;
        p = key_suffix(p, f.key, "_sum\":", 6);
        p = f.dbl ? json::write_double(p, f.dsum) : json::write_i64(p, f.isum);
        p = key_suffix(p, f.key, "_min\":", 6);
        p = f.dbl ? json::write_double(p, f.dmin) : json::write_i64(p, f.imin);
        p = key_suffix(p, f.key, "_max\":", 6);
        p = f.dbl ? json::write_double(p, f.dmax) : json::write_i64(p, f.imax);
      }
    }
    p = json::write_lit(p, ",\"dft_cnt\":");
    p = json::write_u64(p, e.cnt);
    std::memmove(open, open + 1, static_cast<size_t>(p - open - 1));
    --p;
    p = json::write_lit(p, "}}\n");
    e.cnt = 0;
    ++nl;
  }
  live_ = 0;
  // Many distinct functions seen (e.g. generated names): start the next bucket with a fresh table.
  if (entries_.size() > 4096) clear();
  *lines = nl;
  return p;
}

void AggTable::clear() noexcept {
  entries_.clear();
  slots_.clear();
  live_ = 0;
  last_ = 0;
}

}  // namespace agg
}  // namespace dftracer
