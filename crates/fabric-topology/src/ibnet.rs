//! ibnetdiscover / ibsim topology text format (reader and writer).
