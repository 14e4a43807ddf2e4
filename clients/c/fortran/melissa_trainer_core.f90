!> melissa_trainer_core: the constants, the client type and the error handling of the
!> Fortran binding (module melissa_trainer re-exports all of it: use that one).
module melissa_trainer_core
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: error_unit
  use melissa_trainer_c
  implicit none
  private

  !> Status codes (mt_status in melissa_trainer.h).
  integer, parameter, public :: MT_OK = 0, MT_EINVAL = 1, MT_EFIELD = 2, MT_EDTYPE = 3, &
    MT_ESHAPE = 4, MT_ESTATE = 5, MT_EENV = 6, MT_ERENDEZVOUS = 7, MT_ETIMEDOUT = 8, &
    MT_EZMQ = 9, MT_ENOMEM = 10, MT_EMPI = 11, MT_EREFUSED = 12, MT_EREPLY = 13, &
    MT_ESIMREFUSED = 14, MT_EUNREACHABLE = 15
  !> Why mt_predict was refused (mt_refusal in melissa_trainer.h; mt_predict_refusal).
  integer, parameter, public :: MT_REFUSAL_NONE = 0, MT_REFUSAL_BUSY = 1, &
    MT_REFUSAL_NOT_SERVING = 2, MT_REFUSAL_WRONG_RUN = 3, MT_REFUSAL_BAD_REQUEST = 4, &
    MT_REFUSAL_FAILED = 5
  !> Element types (mt_dtype: the protocol's dtype codes).
  integer, parameter, public :: MT_FLOAT32 = 1, MT_FLOAT64 = 2, MT_FLOAT16 = 3, &
    MT_INT8 = 4, MT_INT16 = 5, MT_INT32 = 6, MT_INT64 = 7, MT_UINT8 = 8, MT_UINT16 = 9, &
    MT_UINT32 = 10, MT_UINT64 = 11, MT_BOOL = 12

  !> A client: the C client's handle (for melissa_trainer_mpi, or a program that calls
  !> the C functions itself), and the message of its last error (kept on the Fortran
  !> side, so that it outlives mt_close, which frees the C client).
  type, public :: mt_client_t
    type(c_ptr) :: handle = c_null_ptr
    character(len=:), allocatable :: message
  end type
  !> When an array sent may be written again (mt_reuse; see mt_set_reuse).
  integer, parameter, public :: MT_REUSE_IMMEDIATE = 0, MT_REUSE_NEXT_SEND = 1

  public :: mt_finish, mt_error_message, mt_strerror, mt_version

contains

  ! -- errors ---------------------------------------------------------------------------

  !> Record `status` of `what` for `client` (the C message, or `message` when given) and
  !> report it: into `ierr` when present, else to stderr followed by `error stop`.
  !> Public for melissa_trainer_mpi; a program has no need of it.
  subroutine mt_finish(client, status, what, ierr, message)
    type(mt_client_t), intent(inout) :: client
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: ierr
    character(len=*), intent(in), optional :: message
    if (status /= MT_OK) then
      if (present(message)) then
        client%message = message
      else if (c_associated(client%handle)) then
        client%message = f_string(mt_client_error_c(client%handle))
      end if
      if (.not. allocated(client%message)) client%message = ''
      if (len(client%message) == 0) client%message = mt_strerror(status)
    end if
    if (present(ierr)) then
      ierr = status
    else if (status /= MT_OK) then
      ! (an mt_send told of a refusal: the C library wrote this very line when its watch
      ! learnt it, admission_watch.c, and a program without ierr stops at the first such
      ! send; written here too, it came twice)
      if (status /= MT_ESIMREFUSED .or. what /= 'mt_send') &
        write (error_unit, '(a)') 'melissa_trainer: ' // what // ': ' // client%message
      error stop status
    end if
  end subroutine

  !> The message of the client's last error ('' if none): it names what was wrong.
  function mt_error_message(client) result(message)
    type(mt_client_t), intent(in) :: client
    character(len=:), allocatable :: message
    if (allocated(client%message)) then
      message = client%message
    else
      message = ''
    end if
  end function

  !> The text of a status code ("MT_ESHAPE: wrong element count", ...).
  function mt_strerror(status) result(text)
    integer, intent(in) :: status
    character(len=:), allocatable :: text
    text = f_string(mt_strerror_c(int(status, c_int)))
  end function

  !> The C library's version, "MAJOR.MINOR.PATCH".
  function mt_version() result(text)
    character(len=:), allocatable :: text
    text = f_string(mt_version_c())
  end function

end module melissa_trainer_core
