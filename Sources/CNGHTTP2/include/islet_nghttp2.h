#ifndef ISLET_NGHTTP2_H
#define ISLET_NGHTTP2_H
#include <stdint.h>
#include <nghttp2/nghttp2.h>

/// Frame fields through functions: nghttp2_frame is a union Swift reads awkwardly.
static inline uint8_t islet_h2_frame_type(const nghttp2_frame *frame) { return frame->hd.type; }
static inline uint8_t islet_h2_frame_flags(const nghttp2_frame *frame) { return frame->hd.flags; }
static inline int32_t islet_h2_frame_stream(const nghttp2_frame *frame) { return frame->hd.stream_id; }
static inline int32_t islet_h2_goaway_last_stream(const nghttp2_frame *frame) { return frame->goaway.last_stream_id; }
static inline uint32_t islet_h2_goaway_error(const nghttp2_frame *frame) { return frame->goaway.error_code; }
static inline int islet_h2_headers_category(const nghttp2_frame *frame) { return frame->headers.cat; }

/// Submits SETTINGS with just MAX_CONCURRENT_STREAMS.
static inline int islet_h2_submit_max_streams(nghttp2_session *session, uint32_t streams) {
    nghttp2_settings_entry entry = { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, streams };
    return nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, &entry, 1);
}

static inline uint32_t islet_h2_remote_max_streams(nghttp2_session *session) {
    return nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

enum {
    ISLET_H2_DATA = NGHTTP2_DATA, ISLET_H2_HEADERS = NGHTTP2_HEADERS, ISLET_H2_SETTINGS = NGHTTP2_SETTINGS,
    ISLET_H2_PING = NGHTTP2_PING, ISLET_H2_GOAWAY = NGHTTP2_GOAWAY, ISLET_H2_RST_STREAM = NGHTTP2_RST_STREAM,
    ISLET_H2_FLAG_END_STREAM = NGHTTP2_FLAG_END_STREAM, ISLET_H2_FLAG_ACK = NGHTTP2_FLAG_ACK,
    ISLET_H2_DATA_FLAG_EOF = NGHTTP2_DATA_FLAG_EOF,
    ISLET_H2_REFUSED_STREAM = NGHTTP2_REFUSED_STREAM, ISLET_H2_NO_ERROR = NGHTTP2_NO_ERROR,
    ISLET_H2_CANCEL = NGHTTP2_CANCEL,
    ISLET_H2_HCAT_REQUEST = NGHTTP2_HCAT_REQUEST,
    ISLET_H2_ERR_WOULDBLOCK = NGHTTP2_ERR_WOULDBLOCK, ISLET_H2_ERR_CALLBACK_FAILURE = NGHTTP2_ERR_CALLBACK_FAILURE,
};

#endif
