/* The verifier's hot loops in C: its fast path over a run of rows (`scan`),
 * a Merkle tree level's parent hashes (`node_level`), and the walk that
 * tells plain JSON data from anything else (`plain_json`).
 *
 * `ledger.audit.log.chunk_walk.verify_rows` checks each stored row by rebuilding its
 * expected canonical header and comparing bytes (docs/verify-performance.md).
 * In Python that loop costs several microseconds a row, more than reading
 * the row; this module runs the very same fast path for as many rows as pass
 * it, and stops at the first row that does not: that row is then handled by
 * the Python loop, which explains every fault. So this code only ever says
 * "these rows passed"; every finding is made, and worded, by Python.
 *
 * A row passes when, exactly as in `verify_rows`:
 *   - its columns have the types the ledger writes (bytes, str, int);
 *   - its stream name and event type are "plain" (already in the caller's
 *     caches, or accepted by the caller's callbacks);
 *   - the envelope is LSE2, long enough for its header and signature;
 *   - its signing time's digits are canonical and inside [low, high];
 *   - its header equals, byte for byte, the canonical header rebuilt from:
 *     the chunk's current key, the payload's SHA-256, the previous event's
 *     entry hash (or, for a stream's first event here, the 64 lowercase hex
 *     digits it holds), the time's digits, the row's stream, type, version;
 *   - with `verify` given, `verify(public_key, domain + header, signature)`
 *     is true.
 * Its effects are those of the Python fast path: the entry hash appended to
 * `hashes`, `lasts[stream] = (version, entry hash)`, `firsts[stream]` for a
 * stream's first event, and `clock` = [time digits, time] as last parsed.
 *
 * SHA-256 is OpenSSL's (the library Python's hashlib uses here too), called
 * below EVP (see `sha256`).
 */
#define PY_SSIZE_T_CLEAN
/* SHA256_Init/Update/Final: deprecated in OpenSSL 3 in favour of EVP, but the
 * same block function without EVP's per-hash dispatch and context cleansing,
 * which cost a quarter of a short message's hash (three hashes a row here). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <Python.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <string.h>

#define PREFIX_SIZE 6            /* ">4sH": magic, header length */
#define SIGNATURE_SIZE 64
#define HEX_SIZE 64
#define PREV_OFFSET (11 + 64 + 20 + 64 + 10)
#define SIGNED_AT_OFFSET (PREV_OFFSET + 64 + 14)
#define JSON_SAFE_INT (1LL << 53)

static const char HEXDIGITS[] = "0123456789abcdef";
static const char MAGIC[4] = {'L', 'S', 'E', '2'};

/* The canonical header's fixed parts, in order (see envelope.PLAIN_HEADER). */
static const char P_KEY[] = "{\"key_id\":\"";
static const char P_PAYLOAD[] = "\",\"payload_sha256\":\"";
static const char P_PREV[] = "\",\"prev\":\"";
static const char P_SIGNED_AT[] = "\",\"signed_at\":";
static const char P_STREAM[] = ",\"stream\":\"";
static const char P_TYPE[] = "\",\"type\":\"";
static const char P_VERSION[] = "\",\"version\":";


/* libsodium's crypto_sign_open, as PyNaCl links it (its address handed over
 * by ledger.crypto.signing): the very call the Python path makes, minus the
 * Python objects and calls around it. */
typedef int (*SignOpen)(unsigned char *message, unsigned long long *message_size,
                        const unsigned char *signed_message, unsigned long long signed_size,
                        const unsigned char *public_key);

/* A buffer that only grows, for signature || message and what crypto_sign_open writes. */
typedef struct {
    unsigned char *data;
    size_t size;
} Buffer;

static int
reserve(Buffer *buffer, size_t size)
{
    if (buffer->size >= size)
        return 1;
    unsigned char *data = PyMem_Realloc(buffer->data, size);
    if (data == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    buffer->data = data;
    buffer->size = size;
    return 1;
}

static int
sha256(const unsigned char *data, size_t size, const unsigned char *prefix,
       unsigned char out[32])
{
    SHA256_CTX context;
    return SHA256_Init(&context) && (prefix == NULL || SHA256_Update(&context, prefix, 1)) &&
           SHA256_Update(&context, data, size) && SHA256_Final(out, &context);
}

static void
to_hex(const unsigned char *raw, size_t size, char *out)
{
    for (size_t i = 0; i < size; i++) {
        out[2 * i] = HEXDIGITS[raw[i] >> 4];
        out[2 * i + 1] = HEXDIGITS[raw[i] & 15];
    }
}

static int
from_lower_hex(const char *text, unsigned char *out, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        int value = 0;
        for (int half = 0; half < 2; half++) {
            char c = text[2 * i + half];
            int digit;
            if (c >= '0' && c <= '9')
                digit = c - '0';
            else if (c >= 'a' && c <= 'f')
                digit = c - 'a' + 10;
            else
                return 0;
            value = value * 16 + digit;
        }
        out[i] = (unsigned char)value;
    }
    return 1;
}

/* A cursor over the stored header: each expected piece must come next. */
typedef struct {
    const char *at;
    const char *end;
} Cursor;

static int
expect(Cursor *cursor, const char *piece, size_t size)
{
    if ((size_t)(cursor->end - cursor->at) < size || memcmp(cursor->at, piece, size) != 0)
        return 0;
    cursor->at += size;
    return 1;
}

#define EXPECT_LITERAL(cursor, literal) expect((cursor), (literal), sizeof(literal) - 1)

/* The signing time these canonical digits write (0 <= t < 2^53), or -1. */
static long long
signing_time(const char *digits, Py_ssize_t size)
{
    if (size < 1 || size > 16 || (size > 1 && digits[0] == '0'))
        return -1;
    long long value = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        if (digits[i] < '0' || digits[i] > '9')
            return -1;
        value = value * 10 + (digits[i] - '0');
    }
    return value < JSON_SAFE_INT ? value : -1;
}

static long long
clamped(PyObject *number)
{
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(number, &overflow);
    if (overflow > 0)
        return LLONG_MAX;
    if (overflow < 0)
        return LLONG_MIN;
    return value;
}

/* The cached entry for `key`, else what `make(key)` returns (None: not plain).
 * New reference, Py_None when the row must take the Python path, NULL on error. */
static PyObject *
cached(PyObject *cache, PyObject *key, PyObject *make)
{
    PyObject *value = PyDict_GetItemWithError(cache, key);
    if (value != NULL) {
        Py_INCREF(value);
        return value;
    }
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallOneArg(make, key);
}

/* A stream id column of 32 hex digits (how SQLite stores a UUID), as
 * merkle_log.stream_of names it: lowercase, hyphenated 8-4-4-4-12, which JSON
 * writes as itself. Cached in `names` as (stream, its bytes), as `name_of`
 * does. New reference; Py_None when the column is anything else (the caller
 * asks `name_of`); NULL on error. */
/* uuid.UUID and the name of its `int`, set when the module loads. */
static PyTypeObject *uuid_type;
static PyObject *int_name;

static PyObject *
hex_stream_name(PyObject *names, PyObject *originator)
{
    if (!PyUnicode_CheckExact(originator) || !PyUnicode_IS_ASCII(originator) ||
        PyUnicode_GET_LENGTH(originator) != 32)
        Py_RETURN_NONE;
    const char *hex = (const char *)PyUnicode_DATA(originator);
    char text[36];
    for (int i = 0, at = 0; i < 32; i++) {
        char c = hex[i];
        if (c >= 'A' && c <= 'F')
            c = (char)(c - 'A' + 'a');
        else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            Py_RETURN_NONE;
        if (i == 8 || i == 12 || i == 16 || i == 20)
            text[at++] = '-';
        text[at++] = c;
    }
    PyObject *stream = PyUnicode_FromStringAndSize(text, 36);
    PyObject *encoded = stream == NULL ? NULL : PyBytes_FromStringAndSize(text, 36);
    PyObject *named = encoded == NULL ? NULL : PyTuple_Pack(2, stream, encoded);
    Py_XDECREF(stream);
    Py_XDECREF(encoded);
    if (named != NULL && PyDict_SetItem(names, originator, named) < 0)
        Py_CLEAR(named);
    return named;
}

/* A uuid.UUID stream id column (PostgreSQL's) as merkle_log.stream_of names
 * it, str(UUID), cached in `uuid_names` by the UUID's 128-bit int: the same
 * key (a UUID hashes and compares by it) without the Python __hash__ and
 * __eq__ calls a lookup by the UUID itself makes, a row each. Its own dict:
 * beside the UUID keys of `names`, of equal hashes, every lookup would still
 * call UUID.__eq__. New reference; Py_None when its `int` is not an int (the
 * caller asks `name_of`); NULL on error. */
static PyObject *
uuid_stream_name(PyObject *uuid_names, PyObject *originator)
{
    PyObject *number = PyObject_GetAttr(originator, int_name);
    if (number == NULL)
        return NULL;
    if (!PyLong_CheckExact(number)) {
        Py_DECREF(number);
        Py_RETURN_NONE;
    }
    PyObject *named = PyDict_GetItemWithError(uuid_names, number);
    if (named != NULL) {
        Py_INCREF(named);
        Py_DECREF(number);
        return named;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(number);
        return NULL;
    }
    PyObject *stream = PyObject_Str(originator);
    PyObject *encoded = stream == NULL ? NULL : PyUnicode_AsASCIIString(stream);
    named = encoded == NULL ? NULL : PyTuple_Pack(2, stream, encoded);
    Py_XDECREF(stream);
    Py_XDECREF(encoded);
    if (named != NULL && PyDict_SetItem(uuid_names, number, named) < 0)
        Py_CLEAR(named);
    Py_DECREF(number);
    return named;
}

/* first_leaf + index, as Python adds them (a log position has no bound here). */
static PyObject *
position_of(PyObject *first_leaf, Py_ssize_t index)
{
    PyObject *offset = PyLong_FromSsize_t(index);
    if (offset == NULL)
        return NULL;
    PyObject *position = PyNumber_Add(first_leaf, offset);
    Py_DECREF(offset);
    return position;
}

/* scan(rows, index, end, first_leaf, key, low, high, clock, names, name_of,
 *      topics, topic_of, lasts, firsts, hashes, verify, public_key, domain,
 *      uuid_names)
 * -> the index of the first row in [index, end) that did not pass, or end.
 *
 * Memory safety (tests/test_native_sanitized.py runs the differential tests
 * and a corpus of hostile rows and arguments against a build under ASan and
 * UBSan): every length read from a row is checked against the row's size
 * before the bytes it covers are read; numbers are checked before C
 * arithmetic on them (positions are Python integers); and the callbacks
 * (`name_of`, `topic_of`, `verify`) may run any Python code, so the row
 * being checked is held while they run, `rows` is re-measured each row, and
 * nothing borrowed from a list or dict they could change is used after. */
static PyObject *
scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 19) {
        PyErr_SetString(PyExc_TypeError, "scan() takes 19 arguments");
        return NULL;
    }
    PyObject *rows = args[0], *key = args[4], *clock = args[7], *names = args[8],
             *name_of = args[9], *topics = args[10], *topic_of = args[11], *lasts = args[12],
             *firsts = args[13], *hashes = args[14], *verify = args[15],
             *public_key = args[16], *domain = args[17], *uuid_names = args[18];
    if (!PyList_CheckExact(rows) || !PyBytes_CheckExact(key) || !PyList_CheckExact(clock) ||
        PyList_GET_SIZE(clock) != 2 || !PyDict_CheckExact(names) || !PyDict_CheckExact(topics) ||
        !PyDict_CheckExact(lasts) || !PyDict_CheckExact(firsts) || !PyList_CheckExact(hashes) ||
        !PyBytes_CheckExact(domain) || !PyDict_CheckExact(uuid_names)) {
        PyErr_SetString(PyExc_TypeError, "scan(): unexpected argument types");
        return NULL;
    }
    PyObject *first_leaf = args[3];
    if (!PyLong_CheckExact(first_leaf)) {
        PyErr_SetString(PyExc_TypeError, "scan(): first_leaf must be an int");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[1]);
    if (index == -1 && PyErr_Occurred())
        return NULL;
    if (index < 0) { /* PyList_GET_ITEM does no bounds check */
        PyErr_SetString(PyExc_ValueError, "scan(): index must not be negative");
        return NULL;
    }
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred())
        return NULL;
    long long low = clamped(args[5]);
    if (low == -1 && PyErr_Occurred())
        return NULL;
    long long high = clamped(args[6]);
    if (high == -1 && PyErr_Occurred())
        return NULL;
    const char *key_chars = PyBytes_AS_STRING(key);
    Py_ssize_t key_size = PyBytes_GET_SIZE(key);
    /* The last time parsed: its digits and value (clock[1] < 0: none valid).
     * Exact types: converting anything else could run code that empties `clock`. */
    PyObject *clock_digits = PyList_GET_ITEM(clock, 0);
    if (!PyBytes_CheckExact(clock_digits) || !PyLong_CheckExact(PyList_GET_ITEM(clock, 1))) {
        PyErr_SetString(PyExc_TypeError, "scan(): clock must be [bytes, int]");
        return NULL;
    }
    long long clock_value = PyLong_AsLongLong(PyList_GET_ITEM(clock, 1));
    if (clock_value == -1 && PyErr_Occurred())
        return NULL;
    Py_INCREF(clock_digits);
    int failed = 0;
    /* `verify`: None, libsodium's crypto_sign_open (its address, an int), or a callable. */
    SignOpen sign_open = NULL;
    Buffer signed_message = {NULL, 0}, opened = {NULL, 0};
    if (PyLong_CheckExact(verify)) {
        sign_open = (SignOpen)PyLong_AsVoidPtr(verify);
        if (sign_open == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "scan(): a null crypto_sign_open");
            Py_DECREF(clock_digits);
            return NULL;
        }
    }

    PyObject *held = NULL; /* the row being checked, which a callback may drop from `rows` */
    for (; index < end && index < PyList_GET_SIZE(rows); index++) {
        PyObject *row = PyList_GET_ITEM(rows, index);
        Py_INCREF(row);
        Py_XSETREF(held, row);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 5)
            break;
        PyObject *originator = PyTuple_GET_ITEM(row, 1), *version_obj = PyTuple_GET_ITEM(row, 2),
                 *topic = PyTuple_GET_ITEM(row, 3), *state = PyTuple_GET_ITEM(row, 4);
        if (!PyBytes_CheckExact(state) || !PyUnicode_CheckExact(topic) ||
            !PyLong_CheckExact(version_obj) || originator == Py_None)
            break;
        int overflow = 0;
        long long version = PyLong_AsLongLongAndOverflow(version_obj, &overflow);
        if (overflow || (version == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            break;
        }
        if (version < 0 || version >= JSON_SAFE_INT) /* a header holds no other */
            break;
        const char *data = PyBytes_AS_STRING(state);
        Py_ssize_t size = PyBytes_GET_SIZE(state);
        if (size < PREFIX_SIZE || memcmp(data, MAGIC, 4) != 0)
            break;
        Py_ssize_t header_size = ((unsigned char)data[4] << 8) | (unsigned char)data[5];
        Py_ssize_t header_end = PREFIX_SIZE + header_size;
        if (size < header_end + SIGNATURE_SIZE)
            break;
        const char *header = data + PREFIX_SIZE;

        PyObject *named;
        if (Py_IS_TYPE(originator, uuid_type)) {
            named = uuid_stream_name(uuid_names, originator);
        } else {
            named = PyDict_GetItemWithError(names, originator);
            if (named != NULL)
                Py_INCREF(named);
            else if (!PyErr_Occurred())
                named = hex_stream_name(names, originator);
        }
        if (named == Py_None) {
            Py_DECREF(named);
            named = PyObject_CallOneArg(name_of, originator);
        }
        if (named == NULL) {
            failed = 1;
            break;
        }
        /* The stream an exact str: looking it up in `lasts` runs no code. */
        if (!PyTuple_CheckExact(named) || PyTuple_GET_SIZE(named) != 2 ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(named, 0)) ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(named, 1))) {
            Py_DECREF(named);
            break;
        }
        PyObject *topic_bytes = cached(topics, topic, topic_of);
        if (topic_bytes == NULL) {
            Py_DECREF(named);
            failed = 1;
            break;
        }
        if (!PyBytes_CheckExact(topic_bytes)) {
            Py_DECREF(named);
            Py_DECREF(topic_bytes);
            break;
        }
        PyObject *stream = PyTuple_GET_ITEM(named, 0);
        PyObject *stream_bytes = PyTuple_GET_ITEM(named, 1);
        int passed = 0;
        PyObject *last = NULL, *entry = NULL, *first = NULL;
        do {
            /* The signing time's digits: from SIGNED_AT_OFFSET to the next comma. */
            if (header_size <= SIGNED_AT_OFFSET)
                break;
            const char *digits = header + SIGNED_AT_OFFSET;
            const char *comma = memchr(digits, ',', header_size - SIGNED_AT_OFFSET);
            if (comma == NULL)
                break;
            Py_ssize_t digits_size = comma - digits;
            long long signed_at;
            if (digits_size == PyBytes_GET_SIZE(clock_digits) &&
                memcmp(digits, PyBytes_AS_STRING(clock_digits), digits_size) == 0) {
                signed_at = clock_value;
            }
            else {
                signed_at = signing_time(digits, digits_size);
                if (signed_at >= 0) {
                    PyObject *fresh = PyBytes_FromStringAndSize(digits, digits_size);
                    if (fresh == NULL) {
                        failed = 1;
                        break;
                    }
                    Py_SETREF(clock_digits, fresh);
                    clock_value = signed_at;
                }
            }
            if (signed_at < 0 || signed_at < low || signed_at > high)
                break;

            /* The previous entry hash, as the header must hold it. */
            char prev_hex[HEX_SIZE];
            unsigned char prev_raw[32];
            last = PyDict_GetItemWithError(lasts, stream);
            if (last == NULL && PyErr_Occurred()) {
                failed = 1;
                break;
            }
            if (last != NULL) {
                /* Exact types: converting anything else could run code that frees `last`. */
                if (!PyTuple_CheckExact(last) || PyTuple_GET_SIZE(last) != 2 ||
                    !PyLong_CheckExact(PyTuple_GET_ITEM(last, 0)))
                    break;
                int last_overflow = 0;
                long long last_version =
                    PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(last, 0), &last_overflow);
                PyObject *last_hash = PyTuple_GET_ITEM(last, 1);
                if (last_overflow || last_version == LLONG_MAX || version != last_version + 1 ||
                    !PyBytes_CheckExact(last_hash) || PyBytes_GET_SIZE(last_hash) != 32)
                    break;
                to_hex((const unsigned char *)PyBytes_AS_STRING(last_hash), 32, prev_hex);
            }
            else {
                if (size < PREFIX_SIZE + PREV_OFFSET + HEX_SIZE ||
                    !from_lower_hex(data + PREFIX_SIZE + PREV_OFFSET, prev_raw, 32))
                    break;
                memcpy(prev_hex, data + PREFIX_SIZE + PREV_OFFSET, HEX_SIZE);
            }

            /* The header, piece by piece against what it must be. */
            unsigned char payload_hash[32];
            char payload_hex[HEX_SIZE];
            if (!sha256((const unsigned char *)data + header_end + SIGNATURE_SIZE,
                        size - header_end - SIGNATURE_SIZE, NULL, payload_hash)) {
                PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 failed");
                failed = 1;
                break;
            }
            to_hex(payload_hash, 32, payload_hex);
            char version_text[24];
            int version_size = snprintf(version_text, sizeof version_text, "%lld", version);
            Cursor cursor = {header, header + header_size};
            if (!(EXPECT_LITERAL(&cursor, P_KEY) && expect(&cursor, key_chars, key_size) &&
                  EXPECT_LITERAL(&cursor, P_PAYLOAD) && expect(&cursor, payload_hex, HEX_SIZE) &&
                  EXPECT_LITERAL(&cursor, P_PREV) && expect(&cursor, prev_hex, HEX_SIZE) &&
                  EXPECT_LITERAL(&cursor, P_SIGNED_AT) && expect(&cursor, digits, digits_size) &&
                  EXPECT_LITERAL(&cursor, P_STREAM) &&
                  expect(&cursor, PyBytes_AS_STRING(stream_bytes),
                         PyBytes_GET_SIZE(stream_bytes)) &&
                  EXPECT_LITERAL(&cursor, P_TYPE) &&
                  expect(&cursor, PyBytes_AS_STRING(topic_bytes),
                         PyBytes_GET_SIZE(topic_bytes)) &&
                  EXPECT_LITERAL(&cursor, P_VERSION) &&
                  expect(&cursor, version_text, version_size) && expect(&cursor, "}", 1) &&
                  cursor.at == cursor.end))
                break;

            if (sign_open != NULL) {
                /* As ledger.crypto.signing.verify_signature: a 32-byte key, then
                 * crypto_sign_open(signature || domain || header). */
                Py_ssize_t domain_size = PyBytes_GET_SIZE(domain);
                size_t total = SIGNATURE_SIZE + domain_size + header_size;
                if (!PyBytes_Check(public_key) || PyBytes_GET_SIZE(public_key) != 32)
                    break;
                if (!reserve(&signed_message, total) || !reserve(&opened, total)) {
                    failed = 1;
                    break;
                }
                memcpy(signed_message.data, data + header_end, SIGNATURE_SIZE);
                memcpy(signed_message.data + SIGNATURE_SIZE, PyBytes_AS_STRING(domain), domain_size);
                memcpy(signed_message.data + SIGNATURE_SIZE + domain_size, header, header_size);
                unsigned long long opened_size = 0;
                if (sign_open(opened.data, &opened_size, signed_message.data, total,
                              (const unsigned char *)PyBytes_AS_STRING(public_key)) != 0)
                    break;
            }
            else if (verify != Py_None) {
                PyObject *message = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(domain) +
                                                                         header_size);
                if (message == NULL) {
                    failed = 1;
                    break;
                }
                memcpy(PyBytes_AS_STRING(message), PyBytes_AS_STRING(domain),
                       PyBytes_GET_SIZE(domain));
                memcpy(PyBytes_AS_STRING(message) + PyBytes_GET_SIZE(domain), header,
                       header_size);
                PyObject *signature =
                    PyBytes_FromStringAndSize(data + header_end, SIGNATURE_SIZE);
                PyObject *answer =
                    signature == NULL
                        ? NULL
                        : PyObject_CallFunctionObjArgs(verify, public_key, message, signature,
                                                       NULL);
                Py_DECREF(message);
                Py_XDECREF(signature);
                if (answer == NULL) {
                    failed = 1;
                    break;
                }
                int valid = PyObject_IsTrue(answer);
                Py_DECREF(answer);
                if (valid < 0) {
                    failed = 1;
                    break;
                }
                if (!valid)
                    break;
            }

            unsigned char entry_hash[32];
            static const unsigned char leaf_prefix[1] = {0};
            if (!sha256((const unsigned char *)header, header_size, leaf_prefix, entry_hash)) {
                PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 failed");
                failed = 1;
                break;
            }
            entry = PyBytes_FromStringAndSize((const char *)entry_hash, 32);
            if (entry == NULL) {
                failed = 1;
                break;
            }
            if (last == NULL) {
                PyObject *position = position_of(first_leaf, index);
                first = position == NULL ? NULL
                                         : Py_BuildValue("(NLy#)", position, version,
                                                         (const char *)prev_raw, (Py_ssize_t)32);
                if (first == NULL || PyDict_SetItem(firsts, stream, first) < 0) {
                    failed = 1;
                    break;
                }
            }
            PyObject *head = PyTuple_New(2);
            if (head == NULL) {
                failed = 1;
                break;
            }
            Py_INCREF(version_obj);
            PyTuple_SET_ITEM(head, 0, version_obj);
            Py_INCREF(entry);
            PyTuple_SET_ITEM(head, 1, entry);
            int stored = PyDict_SetItem(lasts, stream, head);
            Py_DECREF(head);
            if (stored < 0 || PyList_Append(hashes, entry) < 0) {
                failed = 1;
                break;
            }
            passed = 1;
        } while (0);
        Py_XDECREF(entry);
        Py_XDECREF(first);
        Py_DECREF(named);
        Py_DECREF(topic_bytes);
        if (!passed)
            break;
    }

    Py_XDECREF(held);
    PyMem_Free(signed_message.data);
    PyMem_Free(opened.data);
    if (!failed) {
        /* PyList_SetItem steals the item, and refuses (IndexError) a clock a
         * callback emptied. */
        PyObject *value = PyLong_FromLongLong(clock_value);
        if (value == NULL || PyList_SetItem(clock, 1, value) < 0)
            failed = 1;
        else {
            Py_INCREF(clock_digits);
            failed = PyList_SetItem(clock, 0, clock_digits) < 0;
        }
    }
    Py_DECREF(clock_digits);
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(index);
}

/* node_level(level) -> the next level up: one parent per pair, an odd last
 * hash left out (AlignedLeaves keeps it where it is). */
static PyObject *
node_level(PyObject *module, PyObject *level)
{
    if (!PyList_CheckExact(level)) {
        PyErr_SetString(PyExc_TypeError, "node_level() takes a list of 32-byte hashes");
        return NULL;
    }
    Py_ssize_t pairs = PyList_GET_SIZE(level) / 2;
    PyObject *parents = PyList_New(pairs);
    if (parents == NULL)
        return NULL;
    static const unsigned char node_prefix[1] = {1};
    unsigned char both[64], parent[32];
    for (Py_ssize_t i = 0; i < pairs; i++) {
        PyObject *left = PyList_GET_ITEM(level, 2 * i), *right = PyList_GET_ITEM(level, 2 * i + 1);
        if (!PyBytes_CheckExact(left) || !PyBytes_CheckExact(right) ||
            PyBytes_GET_SIZE(left) != 32 || PyBytes_GET_SIZE(right) != 32) {
            Py_DECREF(parents);
            PyErr_SetString(PyExc_ValueError, "node_level(): a hash is not 32 bytes");
            return NULL;
        }
        memcpy(both, PyBytes_AS_STRING(left), 32);
        memcpy(both + 32, PyBytes_AS_STRING(right), 32);
        PyObject *hash = sha256(both, 64, node_prefix, parent)
                             ? PyBytes_FromStringAndSize((const char *)parent, 32)
                             : NULL;
        if (hash == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 failed");
            Py_DECREF(parents);
            return NULL;
        }
        PyList_SET_ITEM(parents, i, hash);
    }
    return parents;
}

#define SAFE_INTEGER ((1LL << 53) - 1)

/* 1: plain JSON as canonical.json_problem defines it; 0: not (or too deep to
 * tell here); -1: an error. Exact types only, as the Python walk. */
static int
is_plain_json(PyObject *value, int depth)
{
    if (depth > 200)
        return 0;
    if (value == Py_None || PyBool_Check(value))
        return 1;
    if (PyUnicode_CheckExact(value)) {
        if (PyUnicode_IS_ASCII(value))
            return 1;
        if (PyUnicode_AsUTF8AndSize(value, NULL) == NULL) {
            PyErr_Clear(); /* a lone surrogate: not valid Unicode */
            return 0;
        }
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (number == -1 && PyErr_Occurred())
            return -1;
        return !overflow && number >= -SAFE_INTEGER && number <= SAFE_INTEGER;
    }
    if (PyDict_CheckExact(value)) {
        PyObject *key, *member;
        Py_ssize_t at = 0;
        while (PyDict_Next(value, &at, &key, &member)) {
            if (!PyUnicode_CheckExact(key))
                return 0;
            int plain = is_plain_json(member, depth + 1);
            if (plain != 1)
                return plain;
        }
        return 1;
    }
    if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
        Py_ssize_t size = PySequence_Fast_GET_SIZE(value);
        PyObject **items = PySequence_Fast_ITEMS(value);
        for (Py_ssize_t i = 0; i < size; i++) {
            int plain = is_plain_json(items[i], depth + 1);
            if (plain != 1)
                return plain;
        }
        return 1;
    }
    return 0;
}

/* plain_json(value) -> True when `value` is plain JSON data; False when it is
 * not, or nests too deep to walk here (the Python walk then says why). */
static PyObject *
plain_json(PyObject *module, PyObject *value)
{
    int plain = is_plain_json(value, 0);
    if (plain < 0)
        return NULL;
    return PyBool_FromLong(plain);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "Run verify_rows' fast path over rows[index:end]; return the first index it did not pass."},
    {"node_level", (PyCFunction)node_level, METH_O,
     "The parent hashes SHA-256(0x01 || left || right) of a level's pairs of 32-byte hashes."},
    {"plain_json", (PyCFunction)plain_json, METH_O,
     "True when the value is plain JSON data (canonical.json_problem finds nothing)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The verifier's hot loops in C (see ledger.audit.chunks, ledger.crypto.merkle).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    unsigned char probe[32];
    static const unsigned char abc[3] = {'a', 'b', 'c'};
    static const unsigned char abc_sha256[4] = {0xba, 0x78, 0x16, 0xbf};  /* FIPS 180-2 B.1 */
    if (!sha256(abc, 3, NULL, probe) || memcmp(probe, abc_sha256, 4) != 0) {
        PyErr_SetString(PyExc_ImportError, "OpenSSL's SHA-256 is missing or wrong");
        return NULL;
    }
    if (uuid_type == NULL) {
        PyObject *uuid = PyImport_ImportModule("uuid");
        PyObject *type = uuid == NULL ? NULL : PyObject_GetAttrString(uuid, "UUID");
        Py_XDECREF(uuid);
        if (type == NULL)
            return NULL;
        if (!PyType_Check(type)) {
            Py_DECREF(type);
            PyErr_SetString(PyExc_ImportError, "uuid.UUID is not a type");
            return NULL;
        }
        uuid_type = (PyTypeObject *)type; /* kept for the process's life */
        int_name = PyUnicode_InternFromString("int");
        if (int_name == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
