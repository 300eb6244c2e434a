/* placeholder until the comm layer lands */
typedef int dbuf__comm_placeholder_t;
